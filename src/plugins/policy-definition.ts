import type { AnswerContext, ForwardContext, PolicyContext, ResponseHeadContext } from './policy-context.js';

// The public shape of a policy (docs/plugins.md, "The interface"): a name, an options schema,
// and the hooks of the phases it chooses. Built-in policies (header rules, IP rules) are written
// against the same shape.

/**
 * Anything with zod's `safeParse` (zod 3 or 4, whichever copy the policy's package brings), so a
 * policy's schema is checked without tollgate and the policy sharing one zod.
 */
export interface SafeParseSchema<Out> {
  safeParse(
    value: unknown,
  ):
    | { success: true; data: Out }
    | { success: false; error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> } };
}

/** A JSON Schema (draft 2020-12) object, checked with Ajv; the options are then typed as `Out` by the author. */
export interface JsonSchemaObject {
  readonly type?: string | readonly string[];
  readonly [keyword: string]: unknown;
}

export type OptionsSchema<Out> = SafeParseSchema<Out> | JsonSchemaObject;

/** Refusing: an Error body `{code, message, status}` with a code the policy declared in `errors`. */
export interface Refusal<Code extends string> {
  readonly refuse: Code;
  /** Replaces the declared message (no credentials or secrets in it: the client reads it). */
  readonly message?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** Adding quota units to the request's cost (whole units ≥ 0), decided in the one quota step that follows. */
export interface AddedCost {
  readonly addCost: number;
}

export type AccessVerdict<Code extends string> = Refusal<Code> | AddedCost | void | undefined;

/** An error a policy may answer with: its status (400-499) and default message. */
export interface DeclaredError {
  readonly status: number;
  readonly message: string;
}

type MaybePromise<T> = T | Promise<T>;

export interface PolicyDefinition<Options = unknown, Compiled = Options, Code extends string = string> {
  /** 1-64 of a-z 0-9 - _ .: names its metrics, log lines and KV namespace. */
  readonly name: string;
  /** Checked at load (start, reload, check-config); an error names the file and the field. */
  readonly options?: OptionsSchema<Options>;
  /** Turns the checked options into what the hooks read, once per load (hot reload: again). */
  readonly compile?: (options: Options) => Compiled;
  /** Error codes the policy refuses with (lower_snake_case, not one of the gateway's own). */
  readonly errors?: Readonly<Record<Code, DeclaredError>>;
  /** After authentication and routing, before the quota: refuse, add a cost, or let pass. */
  readonly access?: (ctx: PolicyContext, options: Compiled) => MaybePromise<AccessVerdict<NoInfer<Code>>>;
  /** Once the request is admitted, before it is forwarded: change its request fields. */
  readonly beforeForward?: (ctx: ForwardContext, options: Compiled) => MaybePromise<void>;
  /** As the target's response head is relayed (synchronous: the client is waiting). */
  readonly responseHead?: (ctx: ResponseHeadContext, options: Compiled) => void;
  /** After the answer is complete; cannot delay or change it (logging, metering). */
  readonly afterAnswer?: (ctx: AnswerContext, options: Compiled) => MaybePromise<void>;
}

/**
 * Declares a policy, with its types inferred: `options` (a zod schema) types the hooks' options,
 * `errors` the codes `access` may refuse with. Returns the definition as it is.
 */
export function definePolicy<Options = unknown, Compiled = Options, Code extends string = never>(
  definition: PolicyDefinition<Options, Compiled, Code>,
): PolicyDefinition<Options, Compiled, Code> {
  return definition;
}
