/** An OpenAPI document that cannot be used: its file and where in it (a JSON pointer). */
export class OpenApiDocumentError extends Error {
  constructor(
    readonly file: string,
    readonly pointer: string,
    readonly reason: string,
  ) {
    super(`${file}: ${pointer || '(document)'}: ${reason}`);
    this.name = 'OpenApiDocumentError';
  }
}
