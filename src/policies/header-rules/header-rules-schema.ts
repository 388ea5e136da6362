import { z } from 'zod';
import { ownedFieldReason } from './owned-fields.js';
import { compileValue } from './template.js';

// Schema of a service's `requestHeaders` and `responseHeaders`: fields set (values may use
// ${consumer.id}, ${consumer.plan}, ${request.id}) and fields removed. Checked at load: a name that
// is not a field name, a field the gateway owns, a value with a control character (CR/LF would
// split the message) or an unknown variable names its file and field.

/** RFC 9110 §5.1: a field name is a token. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** RFC 9110 §5.5: visible characters, spaces and tabs inside; no CR, LF, NUL or other controls. */
const FIELD_VALUE = /^[^\x00-\x08\x0a-\x1f\x7f]*$/;

function nameIssue(name: string): string | undefined {
  if (!TOKEN.test(name) || name.length > 128) return 'must be a header field name (letters, digits, - and a few marks)';
  return ownedFieldReason(name.toLowerCase());
}

const fieldRules = z
  .strictObject({
    /** Field → value; replaces what the client (or the upstream) sent. */
    set: z.record(z.string(), z.string().max(4096, 'must be at most 4096 characters')).default({}),
    /** Fields removed. */
    remove: z.array(z.string()).max(100).default([]),
  })
  .superRefine((rules, ctx) => {
    const seen = new Set<string>();
    for (const [name, value] of Object.entries(rules.set)) {
      const nameReason = nameIssue(name);
      if (nameReason) ctx.addIssue({ code: 'custom', path: ['set', name], message: nameReason });
      else if (!FIELD_VALUE.test(value) || value !== value.trim())
        ctx.addIssue({
          code: 'custom',
          path: ['set', name],
          message: 'must hold no control character (CR, LF, …) nor leading or trailing space',
        });
      else {
        const compiled = compileValue(value);
        if (typeof compiled === 'object') ctx.addIssue({ code: 'custom', path: ['set', name], message: compiled.error });
      }
      if (seen.has(name.toLowerCase()))
        ctx.addIssue({ code: 'custom', path: ['set', name], message: 'is set twice (field names are case-insensitive)' });
      seen.add(name.toLowerCase());
    }
    rules.remove.forEach((name, i) => {
      const reason = nameIssue(name);
      if (reason) ctx.addIssue({ code: 'custom', path: ['remove', i], message: reason });
      else if (seen.has(name.toLowerCase()))
        ctx.addIssue({ code: 'custom', path: ['remove', i], message: `"${name}" is also set: set replaces it already` });
    });
  });

export const headerRulesSchema = fieldRules.optional();
export type HeaderRulesConfig = z.infer<typeof headerRulesSchema>;
