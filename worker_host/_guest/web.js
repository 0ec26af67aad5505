// worker-host guest: the Web platform globals bundles expect and QuickJS lacks.
//
// Evaluated before prelude.js, which calls __wh_install_web once with its
// host-operation function and deletes the hook before any bundle runs.
// TextEncoder/TextDecoder are UTF-8 only. fetch goes through the host's network
// policy as one host operation; bodies cross the boundary as base64.
globalThis.__wh_install_web = function installWeb(global, hostOperation) {
  'use strict';

  // ---- UTF-8 ---------------------------------------------------------------

  class TextEncoder {
    get encoding() {
      return 'utf-8';
    }
    encode(input = '') {
      const text = String(input);
      const bytes = [];
      for (let i = 0; i < text.length; i++) {
        let code = text.charCodeAt(i);
        if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
          const low = text.charCodeAt(i + 1);
          if (low >= 0xdc00 && low <= 0xdfff) {
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
            i++;
          }
        }
        if (code >= 0xd800 && code <= 0xdfff) code = 0xfffd;
        if (code < 0x80) bytes.push(code);
        else if (code < 0x800) bytes.push(0xc0 | (code >> 6), 0x80 | (code & 63));
        else if (code < 0x10000)
          bytes.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
        else
          bytes.push(
            0xf0 | (code >> 18),
            0x80 | ((code >> 12) & 63),
            0x80 | ((code >> 6) & 63),
            0x80 | (code & 63),
          );
      }
      return new Uint8Array(bytes);
    }
  }

  function toBytes(input) {
    if (input instanceof Uint8Array) return input;
    if (input instanceof ArrayBuffer) return new Uint8Array(input);
    if (ArrayBuffer.isView(input))
      return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    if (input === undefined) return new Uint8Array(0);
    throw new TypeError('The input must be an ArrayBuffer or a view of one.');
  }

  class TextDecoder {
    constructor(label = 'utf-8', options = {}) {
      const name = String(label).toLowerCase();
      if (name !== 'utf-8' && name !== 'utf8') throw new RangeError(`Unsupported encoding ${label}`);
      this.fatal = Boolean(options && options.fatal);
    }
    get encoding() {
      return 'utf-8';
    }
    decode(input) {
      const bytes = toBytes(input);
      let out = '';
      let i = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
      const bad = () => {
        if (this.fatal) throw new TypeError('The encoded data was not valid UTF-8.');
        out += '\ufffd';
      };
      while (i < bytes.length) {
        const b = bytes[i];
        let need = 0;
        let code = 0;
        let min = 0;
        if (b < 0x80) {
          out += String.fromCharCode(b);
          i++;
          continue;
        } else if (b >= 0xc2 && b < 0xe0) [need, code, min] = [1, b & 31, 0x80];
        else if (b >= 0xe0 && b < 0xf0) [need, code, min] = [2, b & 15, 0x800];
        else if (b >= 0xf0 && b < 0xf5) [need, code, min] = [3, b & 7, 0x10000];
        else {
          bad();
          i++;
          continue;
        }
        let j = 1;
        for (; j <= need; j++) {
          const c = bytes[i + j];
          if (c === undefined || (c & 0xc0) !== 0x80) break;
          code = (code << 6) | (c & 63);
        }
        if (j <= need || code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
          bad();
          i += j <= need ? j : 1; // a truncated sequence is one replacement
          continue;
        }
        out += String.fromCodePoint(code);
        i += need + 1;
      }
      return out;
    }
  }

  function base64FromBytes(bytes) {
    let binary = '';
    for (let i = 0; i < bytes.length; i += 0x8000)
      binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(binary);
  }

  function bytesFromBase64(text) {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  // ---- Headers, Request, Response -----------------------------------------

  class Headers {
    constructor(init) {
      this._list = [];
      if (init instanceof Headers) init = init._list;
      if (Array.isArray(init)) for (const [name, value] of init) this.append(name, value);
      else if (init !== null && typeof init === 'object')
        for (const name of Object.keys(init)) this.append(name, init[name]);
    }
    append(name, value) {
      this._list.push([String(name).toLowerCase(), String(value)]);
    }
    set(name, value) {
      this.delete(name);
      this.append(name, value);
    }
    get(name) {
      const key = String(name).toLowerCase();
      const values = this._list.filter(([n]) => n === key).map(([, v]) => v);
      return values.length ? values.join(', ') : null;
    }
    has(name) {
      return this.get(name) !== null;
    }
    delete(name) {
      const key = String(name).toLowerCase();
      this._list = this._list.filter(([n]) => n !== key);
    }
    forEach(callback, thisArg) {
      for (const [name, value] of this.entries()) callback.call(thisArg, value, name, this);
    }
    *entries() {
      const names = [...new Set(this._list.map(([n]) => n))].sort();
      for (const name of names) yield [name, this.get(name)];
    }
    *keys() {
      for (const [name] of this.entries()) yield name;
    }
    *values() {
      for (const [, value] of this.entries()) yield value;
    }
    [Symbol.iterator]() {
      return this.entries();
    }
  }

  function bodyBytes(body) {
    if (body === undefined || body === null) return null;
    if (typeof body === 'string') return new TextEncoder().encode(body);
    if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) return toBytes(body);
    return new TextEncoder().encode(String(body));
  }

  class Body {
    _init(bytes) {
      this._bytes = bytes;
      this.bodyUsed = false;
    }
    _take() {
      if (this.bodyUsed) return Promise.reject(new TypeError('Body has already been used.'));
      this.bodyUsed = true;
      return Promise.resolve(this._bytes || new Uint8Array(0));
    }
    async arrayBuffer() {
      const bytes = await this._take();
      return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    }
    async bytes() {
      return new Uint8Array(await this.arrayBuffer());
    }
    async text() {
      return new TextDecoder().decode(await this._take());
    }
    async json() {
      return JSON.parse(await this.text());
    }
  }

  class Request extends Body {
    constructor(input, init = {}) {
      super();
      const base = input instanceof Request ? input : null;
      this.url = base ? base.url : String(input);
      this.method = String(init.method || (base ? base.method : 'GET')).toUpperCase();
      this.headers = new Headers(init.headers || (base ? base.headers : undefined));
      this.redirect = init.redirect || (base ? base.redirect : 'follow');
      this.signal = init.signal || (base ? base.signal : undefined);
      this._init(init.body !== undefined ? bodyBytes(init.body) : base ? base._bytes : null);
    }
  }

  class Response extends Body {
    constructor(body, init = {}) {
      super();
      this.status = init.status === undefined ? 200 : init.status;
      this.statusText = init.statusText === undefined ? '' : String(init.statusText);
      this.headers = new Headers(init.headers);
      this.url = init.url || '';
      this.redirected = Boolean(init.redirected);
      this.type = 'basic';
      this._init(bodyBytes(body));
    }
    get ok() {
      return this.status >= 200 && this.status <= 299;
    }
    static json(data, init = {}) {
      const headers = new Headers(init.headers);
      if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      return new Response(JSON.stringify(data), { ...init, headers });
    }
  }

  async function fetch(input, init = {}) {
    const request = new Request(input, init);
    const wire = {
      url: request.url,
      method: request.method,
      headers: request.headers._list.map(([name, value]) => [name, value]),
      redirect: request.redirect,
    };
    if (request._bytes !== null) wire.body = base64FromBytes(request._bytes);
    const answer = await hostOperation('fetch', wire);
    return new Response(bytesFromBase64(answer.body), {
      status: answer.status,
      statusText: answer.statusText,
      headers: answer.headers,
      url: answer.url,
      redirected: answer.redirected,
    });
  }

  // ---- timers and randomness ----------------------------------------------

  const intervals = new Map();
  let nextInterval = 1;
  function setInterval(callback, delay, ...args) {
    const id = -nextInterval++;
    const tick = () => {
      if (!intervals.has(id)) return;
      intervals.set(id, global.setTimeout(tick, delay));
      callback(...args);
    };
    intervals.set(id, global.setTimeout(tick, delay));
    return id;
  }
  function clearInterval(id) {
    if (intervals.has(id)) global.clearTimeout(intervals.get(id));
    intervals.delete(id);
  }

  const crypto = {
    getRandomValues(array) {
      const bytes = toBytes(array);
      for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
      return array;
    },
    randomUUID() {
      const b = crypto.getRandomValues(new Uint8Array(16));
      b[6] = (b[6] & 0x0f) | 0x40;
      b[8] = (b[8] & 0x3f) | 0x80;
      const hex = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
      return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    },
  };

  Object.assign(global, {
    TextEncoder,
    TextDecoder,
    Headers,
    Request,
    Response,
    fetch,
    setInterval,
    clearInterval,
    crypto,
  });
};
