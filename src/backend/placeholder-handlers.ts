import type { IncomingMessage } from 'node:http';
import { errorReply, type Reply } from './reply.js';

// openapi.yaml names `GET /pets/{petId}` (deprecated, with a sunset date) and `GET /store/orders`
// but shows neither their parameters nor their records. These placeholders exist so the routes
// are real (the gateway's deprecation headers and quotas can be exercised end to end) without
// inventing fields the interface does not define.

// Up to 18 digits always fits a signed int64, the id format the interface uses elsewhere.
const PET_ID = /^[0-9]{1,18}$/;

/** GET /v1/pets/{petId}: echoes the id as sent (a string, so no digit is lost) and nothing else. */
export async function showPetPlaceholder(_req: IncomingMessage, [petId = '']: string[]): Promise<Reply> {
  if (!PET_ID.test(petId)) return errorReply('bad_request', 'petId must be 1 to 18 decimal digits');
  return {
    status: 200,
    body: { id: petId, name: null, status: 'unavailable', note: 'pet records are not defined by the service interface' },
  };
}

/** GET /v1/store/orders: no order record is defined, so there are never any orders to list. */
export async function listOrdersPlaceholder(): Promise<Reply> {
  return { status: 200, body: [] };
}
