// Type declarations for @worker-host/sdk, the module plugin authors import. They follow the
// plugin contract (`@zephyrcloudio/harness-plugin`) type for type, so a plugin written against
// the contract type-checks against this module unchanged. Declarations for contributions the
// Worker host does not support (models, MCP servers, journal kinds, event subscribers, Skill
// sources and transforms) are kept so that `PluginContext` is complete; registering one of them
// on the Worker host fails `setup`.
//
// No platform typings are required: `fetch` and `AbortSignal` resolve to the platform's own
// types when they are declared (DOM, Workers or Node typings) and to a small stand-in otherwise.

// =============================================================================================
// platform

/** The platform's `AbortSignal` type, or a minimal structural stand-in when none is declared. */
type PlatformAbortSignal = typeof globalThis extends {
  readonly AbortSignal: { readonly prototype: infer TSignal };
}
  ? TSignal
  : { readonly aborted: boolean; readonly reason: unknown };

/** The platform's global `fetch` type, or a minimal stand-in when none is declared. */
type PlatformFetch = typeof globalThis extends { readonly fetch: infer TFetch }
  ? TFetch
  : (input: string, init?: object) => Promise<unknown>;

// =============================================================================================
// json

/**
 * A plain JSON object. Members may be typed `undefined` so optional fields type-check, but a
 * value sent to the host must omit such members.
 */
export interface JsonObject {
  readonly [key: string]: JsonValue | undefined;
}

/** Any JSON value. `undefined`, `NaN`, `Infinity`, functions and class instances are rejected. */
export type JsonValue = string | number | boolean | null | JsonObject | readonly JsonValue[];

/**
 * A JSON Schema written as plain data. A declared schema has an object root and uses only the
 * keywords the contract allows; `pattern`, `format`, `default`, `examples` and the like reject the
 * declaration at setup.
 */
export type JsonSchema = JsonObject;

// =============================================================================================
// error

/**
 * `cause` when it is a primitive string, `undefined` for anything else (including `String`
 * wrapper objects). Never throws and never runs code the value defines.
 */
export declare const asString: (cause: unknown) => string | undefined;

/** Structural shape of a {@link PluginError}; what {@link isPluginError} narrows to. */
export interface PluginFailure {
  /** Structural tag that identifies the failure across module copies. */
  readonly _tag: "PluginError";
  /** Diagnostic for the plugin author; tool, permission, hook and setup failures never expose it. */
  readonly message: string;
  /** Safe text that may reach the model and clients; blank counts as absent. */
  readonly publicMessage?: string | undefined;
}

/** Typed failure for plugin code to throw from setup, tools, hooks and other callbacks. */
export declare class PluginError extends Error implements PluginFailure {
  /** Structural tag that identifies the failure across module copies. */
  readonly _tag: "PluginError";
  /** Safe client-facing text; see {@link PluginFailure.publicMessage}. */
  readonly publicMessage?: string | undefined;
  /**
   * @param input.message - Diagnostic for the plugin author, kept as the error's `message`.
   * @param input.publicMessage - Safe client-facing text; leave it out when nothing is safe.
   */
  constructor(input: {
    readonly message: string;
    readonly publicMessage?: string | undefined;
  });
}

/**
 * Matches a `PluginError` from any copy of this module by its own `_tag` data property. Never
 * throws and never invokes accessors or conversions; a Proxy trap that throws reports no match.
 */
export declare const isPluginError: (cause: unknown) => cause is PluginFailure;

// =============================================================================================
// limits

/** Largest file `workspaceFiles.readText` returns: 51,200 bytes; default and ceiling of `maxBytes`. */
export declare const MAX_FILE_READ_BYTES = 51200;
/** Shell output kept in memory: 51,200 bytes; more spills to an artifact file. */
export declare const MAX_SHELL_OUTPUT_BYTES = 51200;
/** Largest accepted shell `timeoutMs` (2^31 - 1); the Worker host's default when none is given. */
export declare const MAX_SHELL_TIMEOUT_MS = 2147483647;
/** Largest page `workspaceFiles.readDirectory` returns; also the default `limit`. */
export declare const MAX_DIRECTORY_ENTRIES = 2000;
/** `webFetch.fetchText` timeout when `timeoutMs` is absent: 30,000 ms. */
export declare const DEFAULT_WEB_FETCH_TIMEOUT_MS = 30000;
/** Largest response body `webFetch.fetchText` reads: 5,242,880 bytes. */
export declare const MAX_WEB_FETCH_RESPONSE_BYTES = 5242880;
/** Largest accepted `webFetch.fetchText` `timeoutMs`: 120,000 ms. */
export declare const MAX_WEB_FETCH_TIMEOUT_MS = 120000;
/** Longest journal kind name: 64 characters. */
export declare const MAX_JOURNAL_KIND_LENGTH = 64;
/** Longest stored journal summary: 256 UTF-16 code units; longer summaries are truncated. */
export declare const MAX_JOURNAL_SUMMARY_LENGTH = 256;
/** Largest journal entry `data`: 4,096 UTF-8 bytes of its JSON serialization. */
export declare const MAX_JOURNAL_DATA_BYTES = 4096;
/** Most journal entries one Turn may record across every plugin and kind: 50. */
export declare const MAX_JOURNAL_ENTRIES_PER_TURN = 50;

// =============================================================================================
// workspace

/** Safe failure code carried by a {@link WorkspaceFileError}. */
export type WorkspaceFileErrorCode =
  /** Empty path, NUL character, a working directory outside the root, or a symlink failure. */
  | "invalid_path"
  /** Nothing exists at the path. */
  | "not_found"
  /** The target or a parent component has the wrong kind. */
  | "not_file"
  /** The file is larger than `MAX_FILE_READ_BYTES` and no smaller `maxBytes` was passed. */
  | "too_large"
  /** The file is larger than a caller `maxBytes`, or `maxBytes` is not a positive safe integer. */
  | "max_bytes_exceeded"
  /** The content is not valid UTF-8. */
  | "invalid_utf8"
  /** Any other filesystem failure; the operating-system error is not exposed. */
  | "io";

/** Structural shape of a workspace file failure, as narrowed by {@link isWorkspaceFileError}. */
export interface WorkspaceFileFailure {
  /** Always `'WorkspaceFileError'`. */
  readonly _tag: "WorkspaceFileError";
  /** What went wrong; safe to show. */
  readonly code: WorkspaceFileErrorCode;
}

/** Rejection of a {@link WorkspaceFiles} method. Match it with {@link isWorkspaceFileError}. */
export declare class WorkspaceFileError extends Error implements WorkspaceFileFailure {
  /** Always `'WorkspaceFileError'`. */
  readonly _tag: "WorkspaceFileError";
  /** What went wrong. */
  readonly code: WorkspaceFileErrorCode;
  /** @param input - The failure code. The message becomes `Workspace file failed: <code>`. */
  constructor(input: { readonly code: WorkspaceFileErrorCode });
}

/** Matches a `WorkspaceFileError` from any module copy by its own `_tag` data property. */
export declare const isWorkspaceFileError: (cause: unknown) => cause is WorkspaceFileFailure;

/** Safe failure code carried by a {@link WorkspaceShellError}. */
export type WorkspaceShellErrorCode =
  /** Empty command, NUL character, or a `cwd` outside the root. */
  | "invalid_command"
  /** `timeoutMs` is not a finite number in (0, `MAX_SHELL_TIMEOUT_MS`]. */
  | "invalid_timeout"
  /** The command could not start or its run failed, or `onOutput` threw. */
  | "spawn_failed";

/** Structural shape of a workspace shell failure, as narrowed by {@link isWorkspaceShellError}. */
export interface WorkspaceShellFailure {
  /** Always `'WorkspaceShellError'`. */
  readonly _tag: "WorkspaceShellError";
  /** What went wrong; safe to show. */
  readonly code: WorkspaceShellErrorCode;
}

/** Rejection of {@link WorkspaceShell.execute}. Match it with {@link isWorkspaceShellError}. */
export declare class WorkspaceShellError extends Error implements WorkspaceShellFailure {
  /** Always `'WorkspaceShellError'`. */
  readonly _tag: "WorkspaceShellError";
  /** What went wrong. */
  readonly code: WorkspaceShellErrorCode;
  /** @param input - The failure code. The message becomes `Workspace shell failed: <code>`. */
  constructor(input: { readonly code: WorkspaceShellErrorCode });
}

/** Matches a `WorkspaceShellError` from any module copy by its own `_tag` data property. */
export declare const isWorkspaceShellError: (cause: unknown) => cause is WorkspaceShellFailure;

/**
 * A Session working directory: non-empty, at most 1024 characters, forward slashes, no `..`
 * segments. On the Worker host it resolves inside `/workspace`.
 */
export type SessionWorkdir = string;

/** One entry of a {@link WorkspaceFiles.readDirectory} listing. */
export interface WorkspaceDirectoryEntry {
  /** Entry name within the directory, not a path. */
  readonly name: string;
  /** A symlink reports its target's kind, or `other` when the target cannot be read. */
  readonly kind: "file" | "directory" | "other";
}

/** A path resolved against a Session working directory for authorization. */
export interface WorkspaceFileTarget {
  /** Absolute path with existing symlinks resolved; pass it to the file operation. */
  readonly canonicalPath: string;
  /** Permission resource, workdir-relative inside it (`.` for itself), absolute outside it. */
  readonly resource: string;
  /** Present only when the target lies outside the working directory. */
  readonly externalDirectory?:
    | {
        /** `<dir>/*` for the target directory, or the target's parent. */
        readonly resource: string;
        /** Pattern an **Allow always** reply may save; equal to `resource`. */
        readonly save: string;
      }
    | undefined;
}

/**
 * Host filesystem access, `context.workspaceFiles`. Only `resolvePath` applies a working
 * directory; the other methods take the authorized `canonicalPath`. Methods reject with a
 * {@link WorkspaceFileError}. On the Worker host the passed `signal` is ignored in favour of the
 * call's own.
 */
export interface WorkspaceFiles {
  /** Resolves a path against a working directory; the target need not exist. */
  readonly resolvePath: (input: {
    /** Relative to `cwd`, or absolute. Non-empty, no NUL character. */
    readonly filePath: string;
    /** Session working directory, normally the tool context's `workdir`. */
    readonly cwd?: SessionWorkdir | undefined;
  }) => Promise<WorkspaceFileTarget>;
  /** Reads a whole file as UTF-8 text, bounded by `MAX_FILE_READ_BYTES`. */
  readonly readText: (input: {
    /** File to read, normally an authorized `canonicalPath`. */
    readonly filePath: string;
    /** Per-call byte allowance, a positive safe integer; capped at `MAX_FILE_READ_BYTES`. */
    readonly maxBytes?: number | undefined;
    /** Cancels the read. */
    readonly signal: PlatformAbortSignal;
  }) => Promise<{
    readonly filePath: string;
    readonly content: string;
    readonly byteLength: number;
  }>;
  /** Creates or replaces a file with UTF-8 text, creating missing parent directories. */
  readonly writeText: (input: {
    /** File to write, normally an authorized `canonicalPath`. */
    readonly filePath: string;
    /** Full new content. */
    readonly content: string;
    /** Cancels the write. */
    readonly signal: PlatformAbortSignal;
  }) => Promise<{
    readonly filePath: string;
    readonly byteLength: number;
  }>;
  /** Removes one file; a symlink is removed as a link. */
  readonly removeFile: (input: {
    /** File to remove, normally an authorized `canonicalPath`. */
    readonly filePath: string;
    /** Cancels the removal. */
    readonly signal: PlatformAbortSignal;
  }) => Promise<{
    readonly filePath: string;
  }>;
  /** Lists one page of a directory's entries, sorted by name. */
  readonly readDirectory: (input: {
    /** Directory to list, normally an authorized `canonicalPath`. */
    readonly dirPath: string;
    /** 1-based index of the first entry; defaults to 1. */
    readonly offset?: number | undefined;
    /** Maximum entries; defaults to and is capped at `MAX_DIRECTORY_ENTRIES`. */
    readonly limit?: number | undefined;
    /** Cancels the listing. */
    readonly signal: PlatformAbortSignal;
  }) => Promise<{
    readonly dirPath: string;
    readonly entries: readonly WorkspaceDirectoryEntry[];
    readonly offset: number;
    readonly totalEntries: number;
    readonly truncated: boolean;
  }>;
}

/**
 * Host command execution, `context.workspaceShell`. A non-zero exit or a timeout resolves; only
 * a failure to run rejects, with a {@link WorkspaceShellError}.
 */
export interface WorkspaceShell {
  /** Runs one shell command to completion and returns its combined output tail. */
  readonly execute: (input: {
    /** Shell command line. Non-empty, no NUL character. */
    readonly command: string;
    /** Session working directory to run in; absent runs at the host root. */
    readonly cwd?: SessionWorkdir | undefined;
    /** Time limit in milliseconds, in (0, `MAX_SHELL_TIMEOUT_MS`]. */
    readonly timeoutMs?: number | undefined;
    /** Cancels the command. */
    readonly signal: PlatformAbortSignal;
    /** Receives throttled progress; a throw fails the call with `spawn_failed`. */
    readonly onOutput?: ((activity: ToolActivityUpdate) => void | Promise<void>) | undefined;
  }) => Promise<{
    readonly output: string;
    readonly exitCode: number | null;
    readonly signal: string | null;
    readonly timedOut: boolean;
    readonly truncated: boolean;
    readonly artifact?: TerminalToolOutputArtifact | undefined;
  }>;
}

// =============================================================================================
// web-fetch

/** Safe failure code carried by a {@link WebFetchError}. */
export type WebFetchErrorCode =
  /** Unparseable, not `http:`/`https:`, no host, or embedded credentials. */
  | "invalid_url"
  /** `timeoutMs` is not a positive safe integer or exceeds `MAX_WEB_FETCH_TIMEOUT_MS`. */
  | "invalid_timeout"
  /** DNS, connection, TLS or other request failure. */
  | "request_failed"
  /** The timeout elapsed before the body was read. */
  | "timed_out"
  /** The final response has a non-2xx status. */
  | "http_status"
  /** Declared or actual body larger than `MAX_WEB_FETCH_RESPONSE_BYTES`. */
  | "too_large"
  /** The response `Content-Type` is not textual. */
  | "unsupported_content_type"
  /** The body is not valid UTF-8. */
  | "invalid_utf8";

/** Structural shape of a web fetch failure, as narrowed by {@link isWebFetchError}. */
export interface WebFetchFailure {
  /** Always `'WebFetchError'`. */
  readonly _tag: "WebFetchError";
  /** What went wrong; safe to show. */
  readonly code: WebFetchErrorCode;
}

/** Rejection of {@link WebFetch.fetchText}. Match it with {@link isWebFetchError}. */
export declare class WebFetchError extends Error implements WebFetchFailure {
  /** Always `'WebFetchError'`. */
  readonly _tag: "WebFetchError";
  /** What went wrong. */
  readonly code: WebFetchErrorCode;
  /** @param input - The failure code. The message becomes `Web fetch failed: <code>`. */
  constructor(input: { readonly code: WebFetchErrorCode });
}

/** Matches a `WebFetchError` from any module copy by its own `_tag` data property. */
export declare const isWebFetchError: (cause: unknown) => cause is WebFetchFailure;

/** Preferred response format; it only sets the `Accept` header. */
export type WebFetchFormat = "markdown" | "text" | "html";

/** Bounded HTTP text fetching, `context.webFetch`. */
export interface WebFetch {
  /** Sends one `GET`, follows redirects and reads the whole body as UTF-8 text. */
  readonly fetchText: (input: {
    /** Absolute `http:` or `https:` URL without credentials. */
    readonly url: string;
    /** Preferred response format. */
    readonly format: WebFetchFormat;
    /** Whole-request limit in ms, up to `MAX_WEB_FETCH_TIMEOUT_MS`; defaults to `DEFAULT_WEB_FETCH_TIMEOUT_MS`. */
    readonly timeoutMs?: number | undefined;
    /** Cancels the request. */
    readonly signal: PlatformAbortSignal;
  }) => Promise<{
    readonly content: string;
    readonly contentType: string;
    readonly byteLength: number;
  }>;
}

// =============================================================================================
// permission

/** Outcome of a permission rule; `ask` when nothing matches. */
export type PermissionEffect = "allow" | "ask" | "deny";

/** One permission rule; `action` and `resource` are `*`/`?` patterns. */
export interface PermissionRule {
  readonly action: string;
  readonly resource: string;
  readonly effect: PermissionEffect;
}

/** Ordered rules; the last matching rule wins. */
export type PermissionRuleset = readonly PermissionRule[];

/** One action/resource check a tool asks the host to authorize before `execute` runs. */
export interface PermissionProjection {
  /** Action name matched against rule `action` patterns. */
  readonly action: string;
  /** Concrete resources checked now. Non-empty. */
  readonly resources: readonly [string, ...string[]];
  /** Patterns an **Allow always** reply stores for the Session. */
  readonly save?: readonly string[] | undefined;
  /** Safe JSON that comes back in `context.permissions` during `execute`. */
  readonly metadata?: JsonObject | undefined;
}

/** A resolved approval, as returned by hooks. */
export type ToolApprovalDecision = "allow" | "deny";

// =============================================================================================
// question

/** One selectable choice in a {@link QuestionPrompt}. */
export interface QuestionOption {
  /** 1 to 256 characters; selecting the option answers with this label. */
  readonly label: string;
  /** Up to 4,096 characters; may be empty. */
  readonly description: string;
}

/** One question for the user, passed to `askQuestion`. */
export interface QuestionPrompt {
  /** The full question, 1 to 4,096 characters. */
  readonly question: string;
  /** Short title, 1 to 30 characters. */
  readonly header: string;
  /** At least one choice. */
  readonly options: readonly [QuestionOption, ...QuestionOption[]];
  /** Lets the user select more than one option; absent means false. */
  readonly multiple?: boolean | undefined;
  /** Allows a typed answer; absent means true. */
  readonly custom?: boolean | undefined;
}

/** The user's answer to one question: selected labels or typed text. */
export type QuestionAnswer = readonly string[];

/** A question batch as the host recorded it. */
export interface QuestionRequest {
  readonly id: string;
  readonly sessionId: string;
  readonly turnId: string;
  readonly toolId: string;
  readonly toolCallId: string;
  readonly questions: readonly [QuestionPrompt, ...QuestionPrompt[]];
}

/** Structural shape of {@link QuestionDismissedError}. */
export interface QuestionDismissedFailure {
  /** Structural tag that identifies the failure across module copies. */
  readonly _tag: "QuestionDismissedError";
  /** Fault code the call settles with when the failure escapes `execute`. */
  readonly code: "question_dismissed";
}

/** Rejection from `askQuestion` when the user dismisses the questions or nobody can answer. */
export declare class QuestionDismissedError extends Error implements QuestionDismissedFailure {
  /** Structural tag that identifies the failure across module copies. */
  readonly _tag: "QuestionDismissedError";
  /** Fault code the call settles with when the failure escapes `execute`. */
  readonly code: "question_dismissed";
  /** Creates the error with the fixed message `The user dismissed this question.` */
  constructor();
}

/** Matches a `QuestionDismissedError` from any module copy by its own `_tag` data property. */
export declare const isQuestionDismissedError: (
  cause: unknown,
) => cause is QuestionDismissedFailure;

// =============================================================================================
// tool

/** Lifecycle of a {@link ToolOutputArtifact}. */
export type ToolOutputArtifactState = "writing" | "complete" | "incomplete";

/** A workspace file holding tool output too large to keep inline. */
export interface ToolOutputArtifact {
  /** A UUID. */
  readonly id: string;
  /** Normalized relative workspace path. */
  readonly path: string;
  /** Bytes observed so far: a non-negative safe integer. */
  readonly observedBytes: number;
  readonly state: ToolOutputArtifactState;
}

/** A {@link ToolOutputArtifact} whose producer finished. */
export type TerminalToolOutputArtifact = Omit<ToolOutputArtifact, "state"> & {
  readonly state: "complete" | "incomplete";
};

/** One progress report for a running tool call. */
export interface ToolActivityUpdate {
  /** Short status line, at most 1,024 characters. */
  readonly message?: string | undefined;
  /** Latest output excerpt, at most 50 KiB of UTF-8. */
  readonly preview?: string | undefined;
  /** Total output bytes observed so far. */
  readonly observedBytes: number;
  /** Whether `preview` omits part of the observed output. */
  readonly truncated: boolean;
  /** Workspace file holding the full output, once it spilled. */
  readonly artifact?: ToolOutputArtifact | undefined;
}

/** The second argument to {@link ToolDeclaration.execute}. */
export type ToolExecutionContext = {
  readonly sessionId: string;
  readonly turnId: string;
  readonly workdir: SessionWorkdir;
  readonly toolCallId: string;
  /** Aborts when the Turn is cancelled or ends. */
  readonly signal: PlatformAbortSignal;
  /** The validated projections that authorized this call. */
  readonly permissions: readonly PermissionProjection[];
  /** Reports progress for clients. */
  readonly reportActivity: (activity: ToolActivityUpdate) => Promise<void>;
  /** Asks the user; rejects with `QuestionDismissedError` on dismissal. */
  readonly askQuestion: (
    questions: readonly [QuestionPrompt, ...QuestionPrompt[]],
  ) => Promise<readonly [QuestionAnswer, ...QuestionAnswer[]]>;
  /** Records one durable journal fact for this Turn. */
  readonly reportJournal: (entry: JournalEntry) => Promise<void>;
};

/** The second argument to {@link ToolDeclaration.permissions}. */
export type ToolPermissionContext = Pick<
  ToolExecutionContext,
  "sessionId" | "turnId" | "workdir" | "toolCallId" | "signal"
>;

/** Identity of the model that will receive a request's tool descriptors. */
export interface ToolModelContext {
  readonly providerId: string;
  readonly modelId: string;
  readonly upstreamId: string;
}

/**
 * A tool the model can call, registered with `context.tools.register` during setup.
 *
 * @typeParam TInput - Shape of the validated input; keeping it in line with `inputSchema` is the
 * author's job.
 */
export interface ToolDeclaration<TInput extends object = JsonObject> {
  /** Name the model calls the tool by; `skill` and `task` are reserved. */
  readonly id: string;
  /** Non-empty description sent to the model. */
  readonly description: string;
  /** Plain JSON Schema with an object root, using only the allowed keywords. */
  readonly inputSchema: JsonSchema;
  /** Synchronous model filter; Worker bundles cannot forward it. */
  readonly availableForModel?: ((model: ToolModelContext) => boolean) | undefined;
  /** Marks a workspace read that discovers nested `AGENTS.md` files. */
  readonly discoversWorkspaceInstructions?: true | undefined;
  /** Keeps the tool out of CodeMode scripts. */
  readonly directOnly?: true | undefined;
  /** Projects the validated input into permission checks; absent means the default projection. */
  readonly permissions?:
    | ((input: TInput, context: ToolPermissionContext) => Promise<readonly PermissionProjection[]>)
    | undefined;
  /** Runs one approved call and returns plain JSON. */
  readonly execute: (input: TInput, context: ToolExecutionContext) => Promise<JsonValue>;
}

// =============================================================================================
// journal (unsupported on the Worker host; declared because tool and model contexts name it)

/** One durable fact kind, registered with `context.journal.registerKind`. */
export interface JournalKindDeclaration {
  readonly kind: string;
  readonly dataSchema: JsonSchema;
  readonly maxDataBytes?: number | undefined;
  readonly maxEntriesPerTurn?: number | undefined;
}

/** One bounded durable fact reported with `reportJournal`. */
export interface JournalEntry {
  readonly kind: string;
  readonly summary: string;
  readonly data: JsonObject;
}

// =============================================================================================
// message

/** Image formats the host accepts. */
export type ImageMimeType = "image/jpeg" | "image/png" | "image/gif" | "image/webp";

/** Where an image's bytes come from. */
export type ImageReference =
  | {
      readonly type: "url";
      readonly url: string;
      readonly mimeType?: ImageMimeType | undefined;
    }
  | {
      readonly type: "base64";
      readonly data: string;
      readonly mimeType: ImageMimeType;
    };

/** A run of text. */
export interface PromptTextPart {
  readonly type: "text";
  readonly text: string;
}

/** An image in a prompt, a user message, or a tool result. */
export interface PromptImagePart {
  readonly type: "image";
  readonly source: ImageReference;
}

/** One part of user-authored content. */
export type PromptContentPart = PromptTextPart | PromptImagePart;

/** Non-empty user-authored content. */
export type PromptContent = readonly [PromptContentPart, ...PromptContentPart[]];

/** Reasoning the model exposes as text. */
export interface ReasoningPart {
  readonly type: "reasoning";
  readonly text: string;
}

/** Position of a reasoning item with no visible text. */
export interface ReasoningBoundaryPart {
  readonly type: "reasoning-boundary";
}

/** The model's refusal to answer. */
export interface RefusalPart {
  readonly type: "refusal";
  readonly text: string;
}

/** One tool call made by the model. */
export interface ModelToolCallPart {
  readonly type: "tool-call";
  readonly id: string;
  readonly name: string;
  readonly input: JsonObject;
}

/** One part of a {@link ToolResultValue} of type `content`. */
export type ToolResultContentPart =
  | {
      readonly type: "text";
      readonly text: string;
    }
  | {
      readonly type: "json";
      readonly value: JsonValue;
    }
  | PromptImagePart;

/** Model-visible output of one tool call. */
export type ToolResultValue =
  | {
      readonly type: "content";
      readonly content: readonly [ToolResultContentPart, ...ToolResultContentPart[]];
    }
  | {
      readonly type: "text";
      readonly text: string;
    }
  | {
      readonly type: "json";
      readonly value: JsonValue;
    };

/** The result of one tool call, sent back to the model in a `tool` message. */
export interface ToolResultPart {
  readonly type: "tool-result";
  readonly toolCallId: string;
  readonly output: ToolResultValue;
  readonly isError: boolean;
}

/** One part of an assistant message. */
export type AssistantContentPart =
  | PromptTextPart
  | ReasoningPart
  | ReasoningBoundaryPart
  | RefusalPart
  | ModelToolCallPart;

/** One message in the conversation sent to a model. */
export type ModelMessage =
  | {
      readonly role: "developer";
      readonly content: readonly {
        readonly type: "text";
        readonly text: string;
      }[];
    }
  | {
      readonly role: "user";
      readonly content: readonly PromptContentPart[];
    }
  | {
      readonly role: "assistant";
      readonly content: readonly AssistantContentPart[];
    }
  | {
      readonly role: "tool";
      readonly content: readonly ToolResultPart[];
    };

/** One instruction that precedes the conversation. */
export interface ModelInstruction {
  readonly role: "system" | "developer";
  readonly text: string;
}

/** Ordered instructions, sent before the messages of a model request. */
export type ModelInstructions = readonly ModelInstruction[];

/** How the model must use the request's tools. */
export type ModelToolChoice =
  | { readonly mode: "auto" }
  | { readonly mode: "none" }
  | { readonly mode: "required" }
  | { readonly mode: "tool"; readonly name: string };

/** One tool as the model sees it. */
export interface ModelToolDescriptor {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
}

/** Generation settings for a model request; absent means unset. */
export interface GenerationSettings {
  readonly temperature?: number | undefined;
  readonly topP?: number | undefined;
  readonly maxOutputUnits?: number | undefined;
  readonly stopSequences?: readonly [string, ...string[]] | undefined;
  readonly seed?: number | undefined;
  readonly reasoningEffort?:
    | "none"
    | "minimal"
    | "low"
    | "medium"
    | "high"
    | "xhigh"
    | "max"
    | undefined;
}

/** Kind of image reference a model accepts. */
export type ImageReferenceKind = "url" | "base64";

// =============================================================================================
// model (unsupported on the Worker host)

/** Catalog metadata for one plugin-contributed model. */
export interface PluginModelMetadata {
  readonly displayName: string;
  readonly capabilities: {
    readonly input: readonly ["text" | "image", ...("text" | "image")[]];
    readonly output: readonly ["text", ..."text"[]];
    readonly tools: boolean;
    readonly image?:
      | {
          readonly referenceTypes: readonly [ImageReferenceKind, ...ImageReferenceKind[]];
          readonly mimeTypes: readonly [ImageMimeType, ...ImageMimeType[]];
        }
      | undefined;
  };
  readonly limits: {
    readonly contextUnits: number;
    readonly outputUnits: number;
  };
  readonly pricing?:
    | {
        readonly version: "v1";
        readonly currency: string;
        readonly unit: "million_model_units";
        readonly rates: {
          readonly input: string;
          readonly output: string;
          readonly cacheReadInput?: string | undefined;
          readonly cacheWriteInput?: string | undefined;
        };
      }
    | {
        readonly version: "unknown";
      }
    | undefined;
  readonly defaults?: GenerationSettings | undefined;
}

/** One sibling model a plugin model may delegate to. */
export interface PluginModelCandidate {
  readonly ref: string;
  readonly providerId: string;
  readonly modelId: string;
  readonly displayName: string;
  readonly capabilities: PluginModelMetadata["capabilities"];
  readonly limits: PluginModelMetadata["limits"];
  readonly pricing: NonNullable<PluginModelMetadata["pricing"]>;
  readonly defaults: GenerationSettings | undefined;
}

/** One provider-neutral model request. */
export interface PluginModelRequest {
  readonly model: string;
  readonly instructions: ModelInstructions;
  readonly messages: readonly ModelMessage[];
  readonly tools: readonly ModelToolDescriptor[];
  readonly toolChoice: ModelToolChoice;
  readonly settings: GenerationSettings;
  readonly providerOptions: JsonObject | undefined;
}

/** Token-like usage for one model response. */
export interface PluginModelEventUsage {
  readonly freshInputUnits: number;
  readonly cacheReadInputUnits: number;
  readonly cacheWriteInputUnits: number;
  readonly inputUnits: number;
  readonly outputUnits: number;
  readonly reasoningUnits: number;
  readonly totalUnits: number;
}

/** One event in a plugin model's response stream. */
export type PluginModelEvent =
  | {
      readonly _tag: "ResponseStarted";
    }
  | {
      readonly _tag: "ContentDelta";
      readonly index: number;
      readonly contentId: string;
      readonly contentType: "text" | "reasoning" | "refusal";
      readonly delta: string;
    }
  | {
      readonly _tag: "ContentCompleted";
      readonly index: number;
      readonly contentId: string;
      readonly content: PromptTextPart | ReasoningPart | ReasoningBoundaryPart | RefusalPart;
    }
  | {
      readonly _tag: "ToolCallInputDelta";
      readonly index: number;
      readonly toolCallId: string;
      readonly toolName: string;
      readonly delta: string;
    }
  | {
      readonly _tag: "ToolCallCompleted";
      readonly index: number;
      readonly toolCall: ModelToolCallPart;
    }
  | {
      readonly _tag: "Usage";
      readonly usage: PluginModelEventUsage;
    }
  | {
      readonly _tag: "ResponseFinished";
      readonly reason: "stop" | "tool-calls" | "length" | "content-filter" | "other";
    };

/** Per-call context passed to {@link ModelDeclaration.stream}. */
export interface PluginModelStreamContext {
  readonly sessionId: string;
  readonly turnId: string;
  readonly signal: PlatformAbortSignal;
  readonly listCandidates: () => Promise<readonly PluginModelCandidate[]>;
  readonly delegate: (ref: string, request: PluginModelRequest) => AsyncIterable<PluginModelEvent>;
  readonly reportJournal: (entry: JournalEntry) => Promise<void>;
}

/** A model a plugin contributes to the catalog. */
export interface ModelDeclaration {
  readonly providerId: string;
  readonly providerDisplayName: string;
  readonly modelId: string;
  readonly metadata: PluginModelMetadata;
  readonly stream: (
    request: PluginModelRequest,
    context: PluginModelStreamContext,
  ) => AsyncIterable<PluginModelEvent>;
}

// =============================================================================================
// hook

/** Input to `turn.before`. */
export type TurnBeforeInput = {
  readonly turnId: string;
  readonly prompt: PromptContent;
  readonly model: {
    readonly providerId: string;
    readonly modelId: string;
  };
};

/** Input to `model.request.before`. */
export type ModelRequestBeforeInput = {
  readonly turnId: string;
  readonly providerId: string;
  readonly modelId: string;
  readonly iteration: number;
  readonly systemPrompt?: string | undefined;
  readonly messages: readonly ModelMessage[];
};

/** Input to `tool.execute.before`. */
export type ToolExecuteBeforeInput = {
  readonly turnId: string;
  readonly toolId: string;
  readonly toolCallId: string;
  /** The call's validated input, or an earlier hook's replacement. */
  readonly input: unknown;
};

/** What a `tool.execute.before` handler may return; nothing leaves the call unchanged. */
export type ToolExecuteBeforeResult = {
  /** Replacement input, used whenever the property is present and validated again. */
  readonly input?: unknown;
  /** Decides the call's permission checks; `deny` from any hook wins. */
  readonly approval?: ToolApprovalDecision | undefined;
};

/** Input to `tool.execute.after`. */
export type ToolExecuteAfterInput = ToolExecuteBeforeInput & {
  readonly ok: boolean;
  readonly result: unknown;
};

/** Hook names and their handler signatures. */
export interface HookHandlers {
  readonly "turn.before": (input: TurnBeforeInput) => Promise<void>;
  readonly "model.request.before": (input: ModelRequestBeforeInput) => Promise<void>;
  readonly "tool.execute.before": (
    input: ToolExecuteBeforeInput,
  ) => Promise<void | ToolExecuteBeforeResult>;
  readonly "tool.execute.after": (input: ToolExecuteAfterInput) => Promise<void>;
}

/** The name of a hook. */
export type HookName = keyof HookHandlers;

/** The handler signature for one hook name. */
export type HookHandler<TName extends HookName> = HookHandlers[TName];

/** The settled result of any plain hook handler. */
export type HookResult = void | ToolExecuteBeforeResult;

// =============================================================================================
// agent

/** Which tools an Agent offers the model. */
export type AgentToolSelection =
  | { readonly mode: "all" }
  | { readonly mode: "none" }
  | {
      readonly mode: "include";
      readonly names: readonly [string, ...string[]];
      readonly optionalNames?: readonly string[] | undefined;
    };

/** Where an Agent may run. */
export type AgentMode = "primary" | "subagent" | "all";

/** An Agent profile registered with `context.agents.register`. */
export interface AgentDeclaration {
  readonly id: string;
  readonly displayName: string;
  readonly description: string;
  readonly instructions?: ModelInstructions | undefined;
  readonly model?: string | undefined;
  readonly tools?: AgentToolSelection | undefined;
  readonly toolChoice?: ModelToolChoice | undefined;
  readonly settings?: GenerationSettings | undefined;
  readonly permissions?: PermissionRuleset | undefined;
  readonly mode?: AgentMode | undefined;
  readonly fallbackDefault?: boolean | undefined;
}

// =============================================================================================
// skill

/** A Skill registered directly with `context.skills.register`. */
export interface SkillDeclaration {
  readonly id: string;
  readonly displayName: string;
  readonly description: string;
  readonly body: string;
  readonly version: string;
  readonly modelAdvertisement: {
    readonly advertised: boolean;
    readonly userInvocable: boolean;
  };
  readonly publicMetadata: {
    readonly author?: string | undefined;
    readonly license?: string | undefined;
    readonly homepage?: string | undefined;
    readonly tags: readonly string[];
  };
  readonly files?: readonly string[] | undefined;
}

/** One private HTTP header sent by an HTTP Skill source. */
export interface SkillHttpHeader {
  readonly name: string;
  readonly value: string;
}

/** Loads Skills from the workspace (unsupported on the Worker host). */
export interface WorkspaceSkillSource {
  readonly kind: "workspace";
  readonly id: string;
  readonly directory: string;
  readonly format?: "catalog" | "directory" | undefined;
}

/** Loads a Skill catalog over HTTP (unsupported on the Worker host). */
export interface HttpSkillSource {
  readonly kind: "http";
  readonly id: string;
  readonly catalogUrl: string;
  readonly headers: readonly SkillHttpHeader[];
}

/** A Skill source registered with `context.skills.registerSource`. */
export type SkillSource = WorkspaceSkillSource | HttpSkillSource;

/** A validated Skill as it appears in the catalog. */
export interface Skill {
  readonly id: string;
  readonly displayName: string;
  readonly description: string;
  readonly body: string;
  readonly baseLocation: string;
  readonly source: {
    readonly id: string;
    readonly kind: "plugin" | "workspace" | "http";
  };
  readonly version: {
    readonly skillVersion: string;
    readonly sourceVersion: string;
  };
  readonly modelAdvertisement: SkillDeclaration["modelAdvertisement"];
  readonly publicMetadata: SkillDeclaration["publicMetadata"];
  readonly files: readonly string[];
}

/** Fields a Skill transform replaces; absent fields stay unchanged. */
export interface SkillTransformPatch {
  readonly displayName?: string | undefined;
  readonly description?: string | undefined;
  readonly body?: string | undefined;
  readonly version?: string | undefined;
  readonly modelAdvertisement?: SkillDeclaration["modelAdvertisement"] | undefined;
  readonly publicMetadata?: SkillDeclaration["publicMetadata"] | undefined;
}

/** Rewrites Skills (unsupported on the Worker host). */
export interface SkillTransform {
  readonly id: string;
  readonly transform: (skill: Skill) => Promise<SkillTransformPatch | undefined>;
}

// =============================================================================================
// mcp (unsupported on the Worker host)

/** A bound that is either `unlimited` or `finite` with a positive safe-integer `value`. */
export type ExecutionLimit =
  | { readonly kind: "unlimited" }
  | { readonly kind: "finite"; readonly value: number };

/** Names a credential the host resolves when it opens the connection. */
export type McpCredentialReference = {
  readonly kind: "environment" | "secret" | "oauth";
  readonly reference: string;
};

/** Time limits in milliseconds. */
export interface McpLimits {
  readonly startupMs: ExecutionLimit;
  readonly catalogMs: ExecutionLimit;
  readonly executionMs: ExecutionLimit;
}

/** How the host reconnects after a retryable connection failure. */
export type McpReconnectPolicy =
  | { readonly kind: "manual" }
  | {
      readonly kind: "retry";
      readonly delayMs: number;
      readonly maxAttempts: ExecutionLimit;
    };

/** Client capabilities announced to the server; all must be `false`. */
export interface McpClientCapabilities {
  readonly roots: false;
  readonly sampling: false;
  readonly elicitation: false;
}

/** Fields shared by local and remote MCP server definitions. */
interface McpCommonServerDefinition {
  readonly id: string;
  readonly name: string;
  readonly enabled?: boolean | undefined;
  readonly order?: number | undefined;
  readonly resourceReadTool?: boolean | undefined;
  readonly protocolVersions: readonly [string, ...string[]];
  readonly clientCapabilities?: McpClientCapabilities | undefined;
  readonly limits?: McpLimits | undefined;
  readonly reconnect?: McpReconnectPolicy | undefined;
}

/** An MCP server registered with `context.mcp.register`. */
export type McpServerDefinition =
  | (McpCommonServerDefinition & {
      readonly kind: "local";
      readonly transport: {
        readonly kind: "stdio";
        readonly command: string;
        readonly arguments: readonly string[];
        readonly environment: Readonly<Record<string, McpCredentialReference>>;
      };
    })
  | (McpCommonServerDefinition & {
      readonly kind: "remote";
      readonly transport: {
        readonly kind: "streamable-http";
        readonly endpoint: string;
        readonly headers: Readonly<Record<string, McpCredentialReference>>;
        readonly oauth?: McpCredentialReference | undefined;
      };
    });

// =============================================================================================
// session (observational types; event subscribers are unsupported on the Worker host)

/** Token usage for one model request attempt. */
export interface ModelUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly totalTokens: number;
  readonly cachedPromptTokens?: number | undefined;
  readonly reasoningCompletionTokens?: number | undefined;
}

/** One permission check the host resolves before a tool call runs. */
export interface PermissionRequest {
  readonly id: string;
  readonly sessionId: string;
  readonly turnId: string;
  readonly toolId: string;
  readonly toolCallId: string;
  readonly action: string;
  readonly resources: readonly [string, ...string[]];
  readonly save?: readonly string[] | undefined;
  readonly metadata?: JsonObject | undefined;
}

/** A user's answer to a permission request. */
export type PermissionReply = "once" | "always" | "reject";

/** What resolved a permission request. */
export type ToolApprovalSource =
  | "config"
  | "saved"
  | "hook"
  | "callback"
  | "remote"
  | "default"
  | "timeout"
  | "terminal";

/** Why a Turn failed; safe to show. */
export interface TurnFault {
  readonly code: string;
  readonly message: string;
  readonly providerCode?: string | undefined;
}

/** Where a limit's value came from. */
export type ExecutionLimitOrigin = "configured" | "provider" | "platform";

/** The limit a Turn reached, with the value that applied. */
export type ExecutionLimitEvidence =
  | {
      readonly name:
        | "turn_elapsed"
        | "approval_wait"
        | "provider_elapsed"
        | "provider_attempt_timeout";
      readonly origin: ExecutionLimitOrigin;
      readonly value: number;
      readonly unit: "milliseconds";
    }
  | {
      readonly name: "steering_batches";
      readonly origin: ExecutionLimitOrigin;
      readonly value: number;
      readonly unit: "batches";
    }
  | {
      readonly name: "provider_attempts";
      readonly origin: ExecutionLimitOrigin;
      readonly value: number;
      readonly unit: "attempts";
    }
  | {
      readonly name: "model_context";
      readonly origin: ExecutionLimitOrigin;
      readonly value: number;
      readonly unit: "model_units";
      readonly estimatedInputUnits: number;
      readonly outputReserveUnits: number;
      readonly safetyReserveUnits: number;
      readonly availableInputUnits: number;
      readonly estimator: string;
    };

/** How a Turn ended. */
export type TurnOutcome =
  | {
      readonly kind: "completed";
      readonly turnId: string;
      readonly text: string;
    }
  | {
      readonly kind: "cancelled";
      readonly turnId: string;
      readonly reason?: string | undefined;
    }
  | {
      readonly kind: "failed";
      readonly turnId: string;
      readonly fault: TurnFault;
    }
  | {
      readonly kind: "limit_reached";
      readonly turnId: string;
      readonly limit: ExecutionLimitEvidence;
      readonly diagnostic: TurnFault;
    };

/** An observational Turn event. */
export type TurnEvent =
  | {
      readonly type: "turn.started";
      readonly turnId: string;
      readonly model: {
        readonly providerId: string;
        readonly modelId: string;
      };
    }
  | {
      readonly type: "model.text.delta" | "model.refusal.delta" | "model.reasoning.delta";
      readonly turnId: string;
      readonly partId: string;
      readonly offset: number;
      readonly delta: string;
    }
  | {
      readonly type: "model.usage";
      readonly turnId: string;
      readonly usage: ModelUsage;
    }
  | {
      readonly type: "tool.requested";
      readonly turnId: string;
      readonly toolId: string;
      readonly toolCallId: string;
    }
  | {
      readonly type: "approval.requested";
      readonly turnId: string;
      readonly toolId: string;
      readonly toolCallId: string;
      readonly request: PermissionRequest;
    }
  | {
      readonly type: "approval.resolved";
      readonly turnId: string;
      readonly toolId: string;
      readonly toolCallId: string;
      readonly requestId: string;
      readonly decision: ToolApprovalDecision;
      readonly source: ToolApprovalSource;
      readonly reply?: PermissionReply | undefined;
      readonly replyMessage?: string | undefined;
    }
  | {
      readonly type: "tool.completed";
      readonly turnId: string;
      readonly toolId: string;
      readonly toolCallId: string;
      readonly ok: boolean;
    }
  | {
      readonly type: "tool.progress";
      readonly turnId: string;
      readonly toolId: string;
      readonly toolCallId: string;
      readonly checkpoint: number;
      readonly observedBytes: number;
      readonly truncated: boolean;
      readonly artifactState?: ToolOutputArtifactState | undefined;
    }
  | {
      readonly type: "question.asked";
      readonly turnId: string;
      readonly toolId: string;
      readonly toolCallId: string;
      readonly request: QuestionRequest;
    }
  | {
      readonly type: "question.replied";
      readonly turnId: string;
      readonly toolId: string;
      readonly toolCallId: string;
      readonly requestId: string;
      readonly answers: readonly [QuestionAnswer, ...QuestionAnswer[]];
    }
  | {
      readonly type: "question.rejected";
      readonly turnId: string;
      readonly toolId: string;
      readonly toolCallId: string;
      readonly requestId: string;
    }
  | {
      readonly type: "turn.terminal";
      readonly turnId: string;
      readonly outcome: TurnOutcome;
    };

// =============================================================================================
// plugin

/** Where and for which plugin revision `setup` is running. */
export type PluginActivation =
  | {
      readonly scope: "host";
      readonly revision: {
        readonly id: string;
        readonly version: number;
      };
    }
  | {
      readonly scope: "session";
      readonly sessionId: string;
      readonly revision: {
        readonly id: string;
        readonly version: number;
      };
    };

/**
 * The only argument to {@link Plugin.setup}. On the Worker host, `skills.registerSource`,
 * `skills.registerTransform`, `mcp.register`, `models.register`, `journal.registerKind` and
 * `events.subscribe` throw a `PluginError`: those contributions are unsupported there.
 */
export interface PluginContext {
  /** Host-owned identity of this activation. */
  readonly activation: PluginActivation;
  /** This plugin's options as an owned JSON copy, or `{}`. */
  readonly options: JsonObject;
  /** The platform's global `fetch`, without host policy or limits. */
  readonly fetch: PlatformFetch;
  /** Bounded file access inside the Session workspace. */
  readonly workspaceFiles: WorkspaceFiles;
  /** Shell commands in the Session workspace. */
  readonly workspaceShell: WorkspaceShell;
  /** Bounded web page fetching. */
  readonly webFetch: WebFetch;
  /** Tool registration. */
  readonly tools: {
    /** Adds a tool; the `never` input type accepts any `ToolDeclaration<TInput>`. */
    readonly register: (declaration: ToolDeclaration<never>) => void;
  };
  /** Agent registration. */
  readonly agents: {
    readonly register: (declaration: AgentDeclaration) => void;
    readonly setDefault: (agentId: string) => void;
  };
  /** Skill registration. */
  readonly skills: {
    readonly register: (declaration: SkillDeclaration) => void;
    /** Unsupported on the Worker host. */
    readonly registerSource: (source: SkillSource) => void;
    /** Unsupported on the Worker host. */
    readonly registerTransform: (transform: SkillTransform) => void;
  };
  /** MCP server registration; unsupported on the Worker host. */
  readonly mcp: {
    readonly register: (definition: McpServerDefinition) => void;
  };
  /** Model registration; unsupported on the Worker host. */
  readonly models: {
    readonly register: (declaration: ModelDeclaration) => void;
  };
  /** Journal registration; unsupported on the Worker host. */
  readonly journal: {
    readonly registerKind: (declaration: JournalKindDeclaration) => void;
  };
  /** Hook registration. */
  readonly hooks: {
    readonly register: <TName extends HookName>(name: TName, handler: HookHandler<TName>) => void;
  };
  /** Observation; unsupported on the Worker host. */
  readonly events: {
    readonly subscribe: (handler: (event: TurnEvent) => void | Promise<void>) => void;
  };
}

/** A cleanup returned from `setup`, called once when the activation's scope closes. */
export type PluginCleanup = () => void | Promise<void>;

/** A plugin: the module's default export. The host reads only `id` and `setup`. */
export interface Plugin {
  /** Stable plugin id, such as `example.shout`. */
  readonly id: string;
  /** Registers this plugin's contributions; returns nothing or a cleanup. */
  readonly setup: (context: PluginContext) => void | PluginCleanup | Promise<void | PluginCleanup>;
}

/**
 * Checks and freezes a plugin definition, keeping only `id` and `setup`.
 *
 * @throws {PluginError} When `id` is not a non-empty primitive string or `setup` is not a
 *   function.
 */
export declare const definePlugin: (plugin: {
  readonly id: string;
  readonly setup: Plugin["setup"];
}) => Plugin;

// Only the declarations marked `export` above are public; the helper types stay private.
export {};
