// @worker-host/sdk: the module plugin authors import. It implements the runtime part of the
// plugin contract (`@zephyrcloudio/harness-plugin`): the limit constants, the failure classes
// with their structural `_tag`, the `is*` guards, `asString` and `definePlugin`.
//
// Zero dependencies and no platform APIs, so it bundles unchanged into a Worker bundle and runs
// in any ES2022 engine. Nothing here has shared identity with the host: failures are matched by
// their own `_tag` data property, never by `instanceof`.

// ---------------------------------------------------------------------------------------------
// limits

/** Largest file `workspaceFiles.readText` returns, in bytes (50 KiB); default and ceiling. */
export const MAX_FILE_READ_BYTES = 51200;
/** Shell output kept in memory, in bytes (50 KiB); the rest spills to an artifact file. */
export const MAX_SHELL_OUTPUT_BYTES = 51200;
/** Largest accepted shell `timeoutMs` (2^31 - 1); the Worker host's default as well. */
export const MAX_SHELL_TIMEOUT_MS = 2147483647;
/** Largest page `workspaceFiles.readDirectory` returns; also its default `limit`. */
export const MAX_DIRECTORY_ENTRIES = 2000;
/** `webFetch.fetchText` timeout when `timeoutMs` is absent (30 seconds). */
export const DEFAULT_WEB_FETCH_TIMEOUT_MS = 30000;
/** Largest response body `webFetch.fetchText` reads, in bytes (5 MiB). */
export const MAX_WEB_FETCH_RESPONSE_BYTES = 5242880;
/** Largest accepted `webFetch.fetchText` `timeoutMs` (2 minutes). */
export const MAX_WEB_FETCH_TIMEOUT_MS = 120000;
/** Longest journal kind name, in characters. */
export const MAX_JOURNAL_KIND_LENGTH = 64;
/** Longest stored journal entry summary, in UTF-16 code units; longer ones are truncated. */
export const MAX_JOURNAL_SUMMARY_LENGTH = 256;
/** Largest journal entry `data`, as UTF-8 bytes of its JSON serialization (4 KiB). */
export const MAX_JOURNAL_DATA_BYTES = 4096;
/** Most journal entries one Turn may record across every plugin and kind. */
export const MAX_JOURNAL_ENTRIES_PER_TURN = 50;

// ---------------------------------------------------------------------------------------------
// structural helpers

// Captured at load so that later changes to the globals cannot alter what the guards do.
const { defineProperty, freeze, getOwnPropertyDescriptor, hasOwn } = Object;

// Own, read-only, enumerable data property: what the guards look for and what survives a
// structured copy across the host boundary. Non-configurable so a match cannot change later.
const defineTag = (target, key, value) => {
  defineProperty(target, key, {
    value,
    writable: false,
    enumerable: true,
    configurable: false,
  });
};

// The `name` lives on the prototype so instances carry only the contract's own properties.
const nameClass = (cls, name) => {
  defineProperty(cls.prototype, 'name', {
    value: name,
    writable: true,
    enumerable: false,
    configurable: true,
  });
};

/**
 * The value of `cause`'s own `_tag` data property, or `undefined`. Never invokes getters or
 * conversions: `Object.getOwnPropertyDescriptor` reads the descriptor without calling an
 * accessor, and the descriptor it returns is a fresh ordinary object. Only a Proxy's own traps
 * can run, and anything they throw counts as no tag.
 */
const ownTag = (cause) => {
  if (cause === null || (typeof cause !== 'object' && typeof cause !== 'function')) {
    return undefined;
  }
  try {
    const descriptor = getOwnPropertyDescriptor(cause, '_tag');
    if (descriptor === undefined || !hasOwn(descriptor, 'value')) return undefined;
    return descriptor.value;
  } catch {
    return undefined;
  }
};

// ---------------------------------------------------------------------------------------------
// error

/**
 * Returns `cause` when it is a primitive string and `undefined` for anything else, including
 * `String` wrapper objects and proxies. Decided by `typeof` alone, so no code the value defines
 * (`toString`, `valueOf`, `Symbol.toPrimitive`, Proxy traps) ever runs, and it never throws.
 */
export const asString = (cause) => (typeof cause === 'string' ? cause : undefined);

/**
 * Typed failure for plugin code to throw. `message` is the author's diagnostic and stays
 * private; the optional `publicMessage` is the only text that may reach the model or clients.
 */
export class PluginError extends Error {
  /**
   * @param {{ readonly message: string; readonly publicMessage?: string | undefined }} input
   */
  constructor(input) {
    const { message, publicMessage } = input ?? {};
    super(message);
    defineTag(this, '_tag', 'PluginError');
    // Optional members are omitted rather than set to `undefined`, as the contract asks.
    if (publicMessage !== undefined) defineTag(this, 'publicMessage', publicMessage);
  }
}
nameClass(PluginError, 'PluginError');

/** Matches a `PluginError` from any copy of this module by its own `_tag` data property. */
export const isPluginError = (cause) => ownTag(cause) === 'PluginError';

// ---------------------------------------------------------------------------------------------
// workspace

/** Rejection of a `workspaceFiles` method; carries only a safe `code`. */
export class WorkspaceFileError extends Error {
  /** @param {{ readonly code: string }} input */
  constructor(input) {
    const { code } = input ?? {};
    super(`Workspace file failed: ${code}`);
    defineTag(this, '_tag', 'WorkspaceFileError');
    defineTag(this, 'code', code);
  }
}
nameClass(WorkspaceFileError, 'WorkspaceFileError');

/** Matches a `WorkspaceFileError` by its own `_tag` data property. */
export const isWorkspaceFileError = (cause) => ownTag(cause) === 'WorkspaceFileError';

/** Rejection of `workspaceShell.execute`; carries only a safe `code`. */
export class WorkspaceShellError extends Error {
  /** @param {{ readonly code: string }} input */
  constructor(input) {
    const { code } = input ?? {};
    super(`Workspace shell failed: ${code}`);
    defineTag(this, '_tag', 'WorkspaceShellError');
    defineTag(this, 'code', code);
  }
}
nameClass(WorkspaceShellError, 'WorkspaceShellError');

/** Matches a `WorkspaceShellError` by its own `_tag` data property. */
export const isWorkspaceShellError = (cause) => ownTag(cause) === 'WorkspaceShellError';

// ---------------------------------------------------------------------------------------------
// web-fetch

/** Rejection of `webFetch.fetchText`; carries only a safe `code`. */
export class WebFetchError extends Error {
  /** @param {{ readonly code: string }} input */
  constructor(input) {
    const { code } = input ?? {};
    super(`Web fetch failed: ${code}`);
    defineTag(this, '_tag', 'WebFetchError');
    defineTag(this, 'code', code);
  }
}
nameClass(WebFetchError, 'WebFetchError');

/** Matches a `WebFetchError` by its own `_tag` data property. */
export const isWebFetchError = (cause) => ownTag(cause) === 'WebFetchError';

// ---------------------------------------------------------------------------------------------
// question

/** Rejection of `askQuestion` when the user dismisses it or nobody can answer. */
export class QuestionDismissedError extends Error {
  constructor() {
    super('The user dismissed this question.');
    defineTag(this, '_tag', 'QuestionDismissedError');
    defineTag(this, 'code', 'question_dismissed');
  }
}
nameClass(QuestionDismissedError, 'QuestionDismissedError');

/** Matches a `QuestionDismissedError` by its own `_tag` data property. */
export const isQuestionDismissedError = (cause) => ownTag(cause) === 'QuestionDismissedError';

// ---------------------------------------------------------------------------------------------
// plugin

/**
 * Checks a plugin definition and returns a frozen copy holding only `id` and `setup`. Each of
 * them is read exactly once. Throws a `PluginError` when `id` is not a non-empty primitive string
 * or `setup` is not a function; the host checks the full id format at activation.
 */
export const definePlugin = (plugin) => {
  if (plugin === null || (typeof plugin !== 'object' && typeof plugin !== 'function')) {
    throw new PluginError({ message: 'definePlugin expects an object with `id` and `setup`.' });
  }
  const { id, setup } = plugin;
  if (typeof id !== 'string' || id.length === 0) {
    throw new PluginError({ message: 'definePlugin: `id` must be a non-empty string.' });
  }
  if (typeof setup !== 'function') {
    throw new PluginError({ message: 'definePlugin: `setup` must be a function.' });
  }
  return freeze({ id, setup });
};
