// worker-host guest prelude. Runs once in every fresh isolate, before the bundle.
//
// It owns the guest half of the ABI: the host sends JSON requests through
// __wh_dispatch and reads the state of the current operation through __wh_poll.
// An operation is setup or one registered function. Capabilities are host
// operations: calling one queues a request and returns a promise; when the job
// queue drains, the host reads the queue ("blocked"), performs the requests and
// resumes the guest with their results. The guest never runs unless the host
// is calling it, and a request made outside an operation is refused.
//
// Everything the host reads is a plain-JSON copy made here, so a bundle's
// getters, proxies and odd prototypes run inside the isolate and never reach
// the host. The entry points are non-writable and use intrinsics captured
// before the bundle runs, so a bundle cannot replace them.
(function (global) {
  'use strict';

  const ObjectPrototype = Object.prototype;
  const getPrototypeOf = Object.getPrototypeOf;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const defineProperty = Object.defineProperty;
  const objectKeys = Object.keys;
  const freeze = Object.freeze;
  const isArray = Array.isArray;
  const jsonParse = JSON.parse;
  const jsonStringify = JSON.stringify;
  const numberIsFinite = Number.isFinite;
  const PromiseCtor = Promise;
  const promiseThen = Promise.prototype.then;
  const MapCtor = Map;
  const mapGet = Map.prototype.get;
  const mapSet = Map.prototype.set;
  const mapDelete = Map.prototype.delete;
  const mapSize = Object.getOwnPropertyDescriptor(Map.prototype, 'size').get;
  const stringSlice = String.prototype.slice;
  const toWellFormed = String.prototype.toWellFormed;
  const arrayJoin = Array.prototype.join;
  const ErrorCtor = Error;

  const MAX_JSON_DEPTH = 256;
  const MAX_LOG_LINES = 200;
  const MAX_LOG_LINE = 1000;
  const SETUP_FAILURE_CHARS = 200;

  const slice = (text, end) => stringSlice.call(text, 0, end);

  // Appends without consulting Array.prototype (a bundle may define setters
  // for indices there) and without calling a replaceable `push`.
  function append(list, value) {
    defineProperty(list, list.length, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  }
  const then = (promise, onFulfilled, onRejected) =>
    promiseThen.call(promise, onFulfilled, onRejected);

  // ---- failures ---------------------------------------------------------

  class PluginError extends ErrorCtor {
    constructor(input) {
      super(input.message);
      defineProperty(this, '_tag', { value: 'PluginError', enumerable: true });
      if (input.publicMessage !== undefined)
        defineProperty(this, 'publicMessage', { value: input.publicMessage, enumerable: true });
    }
  }

  const TAGGED_MESSAGES = {
    WorkspaceFileError: 'Workspace file failed: ',
    WorkspaceShellError: 'Workspace shell failed: ',
    WebFetchError: 'Web fetch failed: ',
  };

  // Rebuilds a failure the host reported, with the contract's `_tag` and `code`.
  function rebuildFailure(failure) {
    const tag = failure && failure._tag;
    if (tag === 'QuestionDismissedError') {
      const error = new ErrorCtor('The user dismissed this question.');
      defineProperty(error, 'name', { value: tag, configurable: true, writable: true });
      defineProperty(error, '_tag', { value: tag, enumerable: true });
      defineProperty(error, 'code', { value: 'question_dismissed', enumerable: true });
      return error;
    }
    if (tag in TAGGED_MESSAGES) {
      const error = new ErrorCtor(TAGGED_MESSAGES[tag] + failure.code);
      defineProperty(error, 'name', { value: tag, configurable: true, writable: true });
      defineProperty(error, '_tag', { value: tag, enumerable: true });
      defineProperty(error, 'code', { value: failure.code, enumerable: true });
      return error;
    }
    if (tag === 'FetchFailed') return new TypeError(String(failure.message));
    return new PluginError({ message: String(failure && failure.message) });
  }

  class InvalidOutput extends ErrorCtor {}
  class NotAPlugin extends ErrorCtor {}

  // Reads an own data property without running accessors; undefined otherwise.
  function ownData(value, key) {
    try {
      if ((typeof value !== 'object' && typeof value !== 'function') || value === null)
        return undefined;
      const descriptor = getOwnPropertyDescriptor(value, key);
      return descriptor !== undefined && 'value' in descriptor ? descriptor.value : undefined;
    } catch {
      return undefined;
    }
  }

  function describeFailure(error) {
    try {
      return describeFailureUnguarded(error);
    } catch {
      return { _tag: 'Thrown', message: 'a value was thrown that could not be described' };
    }
  }

  function describeFailureUnguarded(error) {
    if (error instanceof InvalidOutput)
      return { _tag: 'InvalidOutput', message: slice(error.message, SETUP_FAILURE_CHARS) };
    if (error instanceof NotAPlugin) return { _tag: 'NotAPlugin', message: error.message };
    const tag = ownData(error, '_tag');
    if (tag === 'PluginError') {
      const message = ownData(error, 'message');
      const publicMessage = ownData(error, 'publicMessage');
      const failure = { _tag: tag, message: typeof message === 'string' ? message : '' };
      if (typeof publicMessage === 'string') field(failure, 'publicMessage', publicMessage);
      return failure;
    }
    if (tag === 'QuestionDismissedError') return { _tag: tag };
    const name = ownData(error, 'name') ?? ownData(error && getPrototypeOf(error), 'name');
    const message = ownData(error, 'message');
    const text =
      typeof message === 'string'
        ? (typeof name === 'string' ? name + ': ' : '') + message
        : 'a non-error value was thrown';
    const failure = { _tag: 'Thrown', message: slice(text, SETUP_FAILURE_CHARS * 5) };
    if (error instanceof RangeError && message === 'Maximum call stack size exceeded')
      field(failure, 'stackOverflow', true);
    return failure;
  }

  // ---- plain JSON ---------------------------------------------------------

  // Copies `value` as plain JSON, reading each member once. Throws
  // InvalidOutput naming the first offending location.
  function plainJson(value, where) {
    const seen = [];
    function copy(current, path, depth) {
      if (current === null || typeof current === 'string' || typeof current === 'boolean')
        return current;
      if (typeof current === 'number') {
        if (!numberIsFinite(current)) throw new InvalidOutput(`${path} is not a finite number`);
        return current;
      }
      if (typeof current !== 'object') throw new InvalidOutput(`${path} is ${typeof current}`);
      if (depth > MAX_JSON_DEPTH) throw new InvalidOutput(`${path} is nested too deeply`);
      for (let i = 0; i < seen.length; i++)
        if (seen[i] === current) throw new InvalidOutput(`${path} is a cycle`);
      append(seen, current);
      let result;
      if (isArray(current)) {
        result = [];
        const length = current.length;
        for (let i = 0; i < length; i++) {
          if (!(i in current)) throw new InvalidOutput(`${path}[${i}] is a hole`);
          append(result, copy(current[i], `${path}[${i}]`, depth + 1));
        }
      } else {
        const prototype = getPrototypeOf(current);
        if (prototype !== ObjectPrototype && prototype !== null)
          throw new InvalidOutput(`${path} is not a plain object`);
        result = {};
        const keys = objectKeys(current);
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i];
          const member = current[key];
          if (member === undefined) throw new InvalidOutput(`${path}.${key} is undefined`);
          defineProperty(result, key, {
            value: copy(member, `${path}.${key}`, depth + 1),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
      }
      seen.length = seen.length - 1;
      return result;
    }
    return copy(value, where, 0);
  }

  // ---- host operations ---------------------------------------------------

  // An isolate's first operation is loading the bundle, whose top-level code
  // runs before __wh_bundle_loaded starts tracking it: the call is open from
  // the start, so top-level await on a capability or timer works.
  let callOpen = true;
  let nextOperationId = 1;
  let queued = [];
  const pending = new MapCtor();
  // Callbacks attached to a pending request (a shell command's onOutput).
  const attached = new MapCtor();
  // Kinds of capability use refused because no call was open; the host logs them.
  let late = [];
  const MAX_LATE = 100;

  function hostOperation(kind, args, callback) {
    if (!callOpen) {
      if (late.length < MAX_LATE) append(late, kind);
      return PromiseCtor.reject(
        new PluginError({ message: `${kind} was used after the host's call returned.` }),
      );
    }
    let input;
    try {
      input = plainJson(args, kind);
    } catch (error) {
      return PromiseCtor.reject(new PluginError({ message: error.message }));
    }
    return new PromiseCtor((resolve, reject) => {
      const id = nextOperationId++;
      mapSet.call(pending, id, { resolve, reject });
      if (typeof callback === 'function') mapSet.call(attached, id, callback);
      append(queued, { id, kind, input });
    });
  }

  // Tells the host that a callback it delivered has finished.
  function callbackDone(callbackId, ok) {
    append(queued, { id: 0, kind: 'callback.done', input: { callbackId, ok } });
  }

  function runCallback(delivery) {
    const callback = mapGet.call(attached, delivery.id);
    let promise;
    try {
      promise = PromiseCtor.resolve(
        typeof callback === 'function' ? callback(delivery.value) : undefined,
      );
    } catch (error) {
      promise = PromiseCtor.reject(error);
    }
    then(
      promise,
      () => callbackDone(delivery.callbackId, true),
      () => callbackDone(delivery.callbackId, false),
    );
  }

  function resume(request) {
    const results = request.results;
    for (let i = 0; i < results.length; i++) {
      const result = results[i];
      const waiter = mapGet.call(pending, result.id);
      if (waiter === undefined) continue;
      mapDelete.call(pending, result.id);
      mapDelete.call(attached, result.id);
      if (result.ok) waiter.resolve(result.value);
      else waiter.reject(rebuildFailure(result.error));
    }
    const callbacks = request.callbacks || [];
    for (let i = 0; i < callbacks.length; i++) runCallback(callbacks[i]);
  }

  // Drops `signal` (the host applies the call's own deadline) and callbacks.
  function withoutSignal(input) {
    if (typeof input !== 'object' || input === null) return input;
    const copy = {};
    const keys = objectKeys(input);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      const member = input[key];
      // NaN and Infinity are numbers to a plugin but not JSON: sent as text,
      // the host refuses them with the contract's code for a bad number.
      if (key !== 'signal' && typeof member !== 'function' && member !== undefined)
        copy[key] = typeof member === 'number' && !numberIsFinite(member) ? String(member) : member;
    }
    return copy;
  }

  const capability = (kind) => (input) => hostOperation(kind, withoutSignal(input));
  const shellExecute = (input) =>
    hostOperation(
      'workspaceShell.execute',
      withoutSignal(input),
      input !== null && typeof input === 'object' ? input.onOutput : undefined,
    );

  // ---- globals a bundle may expect ---------------------------------------

  // Math.random is xoshiro128** seeded by the host for every isolate: isolates
  // start from one memory snapshot, so QuickJS's own state would repeat.
  const imul = Math.imul;
  let r0 = 1, r1 = 2, r2 = 3, r3 = 4;
  function next32() {
    const result = imul(((imul(r1, 5) << 7) | (imul(r1, 5) >>> 25)), 9) >>> 0;
    const t = r1 << 9;
    r2 ^= r0;
    r3 ^= r1;
    r1 ^= r2;
    r0 ^= r3;
    r2 ^= t;
    r3 = (r3 << 11) | (r3 >>> 21);
    return result;
  }
  defineProperty(Math, 'random', {
    value: function random() {
      return ((next32() >>> 5) * 67108864 + (next32() >>> 6)) / 9007199254740992;
    },
    writable: true,
    configurable: true,
  });
  function seed(words) {
    [r0, r1, r2, r3] = words;
    if ((r0 | r1 | r2 | r3) === 0) r0 = 1;
    for (let i = 0; i < 8; i++) next32();
  }

  let logs = [];
  function log(level) {
    return (...parts) => {
      if (logs.length >= MAX_LOG_LINES) return;
      let line = '';
      for (let i = 0; i < parts.length; i++) {
        let text;
        try {
          text = typeof parts[i] === 'string' ? parts[i] : jsonStringify(parts[i]);
        } catch {
          text = typeof parts[i];
        }
        line += (i ? ' ' : '') + text;
      }
      append(logs, { level, line: slice(line, MAX_LOG_LINE) });
    };
  }
  global.console = {
    log: log('info'),
    info: log('info'),
    debug: log('debug'),
    warn: log('warn'),
    error: log('error'),
  };

  class AbortSignal {
    constructor() {
      this.aborted = false;
      this.reason = undefined;
      this.onabort = null;
    }
    addEventListener() {}
    removeEventListener() {}
    throwIfAborted() {
      if (this.aborted) throw this.reason;
    }
    static abort(reason) {
      const signal = new AbortSignal();
      signal.aborted = true;
      signal.reason = reason;
      return signal;
    }
  }
  class AbortController {
    constructor() {
      this.signal = new AbortSignal();
    }
    abort(reason) {
      if (this.signal.aborted) return;
      this.signal.aborted = true;
      this.signal.reason = reason === undefined ? new ErrorCtor('aborted') : reason;
      if (typeof this.signal.onabort === 'function') this.signal.onabort();
    }
  }
  global.AbortSignal = AbortSignal;
  global.AbortController = AbortController;

  let nextTimerId = 1;
  const cancelledTimers = new MapCtor();
  global.setTimeout = (callback, delay, ...args) => {
    const id = nextTimerId++;
    const ms = numberIsFinite(delay) && delay > 0 ? delay : 0;
    then(hostOperation('timer', { ms }), () => {
      if (mapGet.call(cancelledTimers, id)) return;
      if (typeof callback === 'function') callback(...args);
    }, () => {});
    return id;
  };
  global.clearTimeout = (id) => {
    mapSet.call(cancelledTimers, id, true);
  };

  const installWeb = global.__wh_install_web;
  delete global.__wh_install_web;
  installWeb(global, hostOperation);
  const platformFetch = global.fetch;

  // ---- the bundle and its registrations ----------------------------------

  let bundleNamespace = null;
  let bundleEvaluation = null;
  let registry = null;
  let cleanup;

  const UNSUPPORTED = (name) => () => {
    throw new PluginError({
      message: `${name} is not supported on the Worker host.`,
      publicMessage: `${name} is not supported on the Worker host.`,
    });
  };

  function requireObject(value, what) {
    if (typeof value !== 'object' || value === null)
      throw new PluginError({ message: `${what} must be an object.` });
  }

  function makeRegistry() {
    return { tools: [], toolFunctions: [], hooks: [], skills: [], agents: [], defaultAgents: [] };
  }

  function assertOpen(reg, what) {
    if (registry !== reg || reg.sealed)
      throw new PluginError({ message: `${what} was called after setup returned.` });
  }

  function makeContext(activation, options, reg) {
    const files = {
      resolvePath: capability('workspaceFiles.resolvePath'),
      readText: capability('workspaceFiles.readText'),
      writeText: capability('workspaceFiles.writeText'),
      removeFile: capability('workspaceFiles.removeFile'),
      readDirectory: capability('workspaceFiles.readDirectory'),
    };
    return freeze({
      activation: freeze(activation),
      options,
      fetch: platformFetch,
      workspaceFiles: freeze(files),
      workspaceShell: freeze({ execute: shellExecute }),
      webFetch: freeze({ fetchText: capability('webFetch.fetchText') }),
      tools: freeze({
        register(declaration) {
          assertOpen(reg, 'tools.register');
          requireObject(declaration, 'A tool declaration');
          const { id, description, inputSchema, execute, permissions } = declaration;
          if (typeof id !== 'string' || id === '')
            throw new PluginError({ message: 'A tool id must be a non-empty string.' });
          if (typeof execute !== 'function')
            throw new PluginError({ message: `Tool ${id}: execute must be a function.` });
          if (permissions !== undefined && typeof permissions !== 'function')
            throw new PluginError({ message: `Tool ${id}: permissions must be a function.` });
          const tool = {
            id,
            description,
            inputSchema,
            permissions: typeof permissions === 'function',
          };
          if (declaration.directOnly !== undefined) tool.directOnly = declaration.directOnly;
          if (declaration.discoversWorkspaceInstructions !== undefined)
            tool.discoversWorkspaceInstructions = declaration.discoversWorkspaceInstructions;
          // Every member the host reads is a bounded plain copy.
          append(reg.tools, plainJson(tool, `tool ${slice(id, 64)}`));
          reg.toolFunctions[reg.toolFunctions.length] = { id, execute, permissions };
        },
      }),
      hooks: freeze({
        register(name, handler) {
          assertOpen(reg, 'hooks.register');
          if (typeof name !== 'string')
            throw new PluginError({ message: 'A hook name must be a string.' });
          if (typeof handler !== 'function')
            throw new PluginError({ message: `Hook ${name}: the handler must be a function.` });
          reg.hooks[reg.hooks.length] = { name, handler };
        },
      }),
      skills: freeze({
        register(declaration) {
          assertOpen(reg, 'skills.register');
          requireObject(declaration, 'A skill declaration');
          reg.skills[reg.skills.length] = plainJson(declaration, 'skill');
        },
        registerSource: UNSUPPORTED('skills.registerSource'),
        registerTransform: UNSUPPORTED('skills.registerTransform'),
      }),
      agents: freeze({
        register(declaration) {
          assertOpen(reg, 'agents.register');
          requireObject(declaration, 'An agent declaration');
          reg.agents[reg.agents.length] = plainJson(declaration, 'agent');
        },
        setDefault(agentId) {
          assertOpen(reg, 'agents.setDefault');
          if (typeof agentId !== 'string')
            throw new PluginError({ message: 'agents.setDefault takes an agent id string.' });
          reg.defaultAgents[reg.defaultAgents.length] = agentId;
        },
      }),
      mcp: freeze({ register: UNSUPPORTED('mcp.register') }),
      models: freeze({ register: UNSUPPORTED('models.register') }),
      journal: freeze({ registerKind: UNSUPPORTED('journal.registerKind') }),
      events: freeze({ subscribe: UNSUPPORTED('events.subscribe') }),
    });
  }

  async function runSetup(request) {
    await bundleEvaluation;
    const plugin = bundleNamespace.default;
    if (typeof plugin !== 'object' || plugin === null)
      throw new NotAPlugin('The bundle has no default export object.');
    const { id, setup } = plugin;
    if (typeof id !== 'string' || typeof setup !== 'function')
      throw new NotAPlugin('The default export is not an object with an id string and a setup function.');
    const reg = makeRegistry();
    registry = reg;
    const returned = await setup(makeContext(request.activation, request.options, reg));
    if (returned !== undefined && typeof returned !== 'function')
      throw new PluginError({
        message: 'setup must return nothing or a cleanup function.',
      });
    reg.sealed = true;
    cleanup = returned;
    const hooks = [];
    for (let i = 0; i < reg.hooks.length; i++) hooks[i] = reg.hooks[i].name;
    return {
      pluginId: id,
      tools: reg.tools,
      hooks,
      skills: reg.skills,
      agents: reg.agents,
      defaultAgents: reg.defaultAgents,
      cleanup: typeof returned === 'function',
    };
  }

  function findTool(toolId) {
    const functions = registry === null ? [] : registry.toolFunctions;
    for (let i = 0; i < functions.length; i++) if (functions[i].id === toolId) return functions[i];
    throw new PluginError({ message: `No tool ${toolId} was registered.` });
  }

  function toolContext(ctx, withCallbacks) {
    const context = {
      sessionId: ctx.sessionId,
      turnId: ctx.turnId,
      workdir: ctx.workdir,
      toolCallId: ctx.toolCallId,
      signal: new AbortSignal(),
    };
    if (withCallbacks) {
      context.permissions = ctx.permissions;
      // Not through withoutSignal: the contract rejects explicit undefined here.
      context.reportActivity = (activity) =>
        then(hostOperation('reportActivity', activity), () => undefined);
      context.askQuestion = (questions) => hostOperation('askQuestion', { questions });
      context.reportJournal = () =>
        PromiseCtor.reject(
          new PluginError({ message: 'reportJournal is not supported on the Worker host.' }),
        );
    }
    return freeze(context);
  }

  // A hook's answer as the host reads it: `input` present counts even when it is
  // undefined (sent as null, so it fails validation as the contract says), and
  // `approval: undefined` is no approval.
  function hookResult(value) {
    if (typeof value !== 'object' || value === null || isArray(value)) return value;
    const result = {};
    const keys = objectKeys(value);
    for (let i = 0; i < keys.length; i++) {
      const member = value[keys[i]];
      if (keys[i] === 'input') field(result, 'input', member === undefined ? null : member);
      else if (!(keys[i] === 'approval' && member === undefined)) field(result, keys[i], member);
    }
    return result;
  }

  async function runInvoke(request) {
    const target = request.target;
    if (target.kind === 'tool.execute') {
      const tool = findTool(target.toolId);
      const value = await tool.execute(request.input, toolContext(request.context, true));
      return plainJson(value, 'result');
    }
    if (target.kind === 'tool.permissions') {
      const tool = findTool(target.toolId);
      const projections =
        tool.permissions === undefined
          ? [{ action: tool.id, resources: ['*'], save: ['*'] }]
          : await tool.permissions(request.input, toolContext(request.context, false));
      return plainJson(projections, 'permissions');
    }
    if (target.kind === 'hook') {
      const hook = registry === null ? undefined : registry.hooks[target.index];
      if (hook === undefined) throw new PluginError({ message: 'No such hook.' });
      const value = await hook.handler(request.input);
      return value === undefined ? null : plainJson(hookResult(value), 'hook result');
    }
    if (target.kind === 'cleanup') {
      if (typeof cleanup === 'function') await cleanup();
      return null;
    }
    throw new PluginError({ message: 'Unknown invocation.' });
  }

  // ---- entry points -------------------------------------------------------

  let outcome = null;

  // Starts one operation: capabilities work from its first synchronous step
  // until it settles.
  function begin(operation, request) {
    outcome = null;
    callOpen = true;
    let promise;
    try {
      promise = PromiseCtor.resolve(operation(request));
    } catch (error) {
      promise = PromiseCtor.reject(error);
    }
    then(
      promise,
      (value) => {
        callOpen = false;
        outcome = { status: 'done', value: value === undefined ? null : value };
      },
      (error) => {
        callOpen = false;
        outcome = { status: 'failed', error: describeFailure(error) };
      },
    );
  }

  function entry(name, fn) {
    defineProperty(global, name, { value: fn, writable: false, configurable: false });
  }

  entry('__wh_bundle_loaded', (namespace, evaluation) => {
    bundleNamespace = namespace;
    bundleEvaluation = evaluation;
    begin(() => then(evaluation, () => null));
  });

  entry('__wh_dispatch', (text) => {
    const request = jsonParse(text);
    if (request.op === 'resume') resume(request);
    else if (request.op === 'seed') seed(request.seed);
    else if (request.op === 'setup') begin(runSetup, request);
    else if (request.op === 'invoke') begin(runInvoke, request);
    else throw new ErrorCtor('unknown request');
  });

  // Serializes the prelude's own plain copies. Unlike JSON.stringify it never
  // looks up `toJSON`, and it emits only well-formed strings.
  function serialize(value, parts) {
    if (value === null || typeof value === 'number' || typeof value === 'boolean') {
      append(parts, jsonStringify(value));
    } else if (typeof value === 'string') {
      append(parts, jsonStringify(toWellFormed.call(value)));
    } else if (isArray(value)) {
      append(parts, '[');
      for (let i = 0; i < value.length; i++) {
        if (i) append(parts, ',');
        serialize(value[i], parts);
      }
      append(parts, ']');
    } else {
      append(parts, '{');
      const keys = objectKeys(value);
      for (let i = 0; i < keys.length; i++) {
        if (i) append(parts, ',');
        append(parts, jsonStringify(toWellFormed.call(keys[i])));
        append(parts, ':');
        serialize(value[keys[i]], parts);
      }
      append(parts, '}');
    }
  }

  function field(target, key, value) {
    defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  }

  entry('__wh_poll', () => {
    const answer = { __proto__: null };
    if (outcome !== null) {
      field(answer, 'status', outcome.status);
      field(answer, outcome.status === 'done' ? 'value' : 'error',
            outcome.status === 'done' ? outcome.value : outcome.error);
    } else if (queued.length > 0 || mapSize.call(pending) > 0) {
      field(answer, 'status', 'blocked');
      field(answer, 'ops', queued);
    } else {
      field(answer, 'status', 'stalled');
    }
    if (outcome !== null || queued.length > 0) queued = [];
    if (logs.length > 0) {
      field(answer, 'logs', logs);
      logs = [];
    }
    if (late.length > 0) {
      field(answer, 'late', late);
      late = [];
    }
    const parts = [];
    serialize(answer, parts);
    return arrayJoin.call(parts, '');
  });
})(globalThis);
