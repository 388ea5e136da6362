import type { ServerResponse } from 'node:http';
import type { Answer } from './context.js';

/** Writes a policy's Answer (a fixed body with its headers). HEAD gets the headers only (node:http drops the body). */
export function sendAnswer(res: ServerResponse, answer: Answer): void {
  for (const name in answer.headers) res.setHeader(name, answer.headers[name]!);
  res.statusCode = answer.status;
  // RFC 9110 §8.6: a 204 carries no Content-Length.
  if (answer.status !== 204) res.setHeader('content-length', answer.body.length);
  res.end(answer.body);
}
