import { describe, expect, it } from 'vitest';
import { createCategory, listCategories } from '../../src/backend/category-handlers.js';
import { listOrdersPlaceholder, showPetPlaceholder } from '../../src/backend/placeholder-handlers.js';
import { matchRoute } from '../../src/backend/routes.js';

describe('matchRoute', () => {
  it('routes the category operations by method', () => {
    expect(matchRoute('GET', '/v1/categories')).toEqual({ handler: listCategories, params: [] });
    expect(matchRoute('POST', '/v1/categories')).toEqual({ handler: createCategory, params: [] });
    expect(matchRoute('HEAD', '/v1/categories')).toEqual({ handler: listCategories, params: [] });
  });

  it('captures the petId as sent', () => {
    expect(matchRoute('GET', '/v1/pets/0042')).toEqual({ handler: showPetPlaceholder, params: ['0042'] });
    expect(matchRoute('GET', '/v1/store/orders')).toEqual({ handler: listOrdersPlaceholder, params: [] });
  });

  it('answers 405 with the allowed methods for a known path', () => {
    expect(matchRoute('DELETE', '/v1/categories')).toEqual({
      reply: { error: 'method_not_allowed', message: 'DELETE is not allowed on /v1/categories.', headers: { allow: 'GET, POST, HEAD' } },
    });
  });

  it('never treats an Object.prototype name as a method', () => {
    for (const method of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(matchRoute(method, '/v1/categories')).toMatchObject({ reply: { error: 'method_not_allowed' } });
    }
  });

  it.each(['/', '/v1/categories/', '/v1/categories/1', '/v1//categories', '/V1/categories', '/v1/pets/', '/v1/pets/1/2'])(
    'answers 404 for %s',
    (path) => {
      expect(matchRoute('GET', path)).toMatchObject({ reply: { error: 'not_found' } });
    },
  );
});

describe('pet placeholder', () => {
  it('refuses a petId that is not 1 to 18 digits', async () => {
    for (const petId of ['', 'a', '1234567890123456789', ' 1']) {
      expect(await showPetPlaceholder({} as never, [petId])).toMatchObject({
        error: 'bad_request',
        message: expect.stringContaining('petId'),
      });
    }
  });
});
