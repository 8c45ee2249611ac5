// Calls to the Vela API from the console, with the API key when one was given.
//
// The key lives only in sessionStorage: it is gone when the tab closes, never written to localStorage or a cookie,
// and never put in a URL. Every request sends it as `Authorization: Bearer <key>`.

const KEY_ITEM = "vela.apiKey";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** A request body that is JSON text already, sent as it is: a filter typed in the console keeps its numbers
 * exactly as written (JSON.parse would turn 2005.0 into 2005, and round integers past 2^53). */
export class RawJson {
  constructor(text) {
    this.text = text;
  }
}

let unauthorized = () => {};

/** Called with the ApiError of every 401, so that the page can ask for a key. */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

export function apiKey() {
  return sessionStorage.getItem(KEY_ITEM);
}

export function setApiKey(key) {
  sessionStorage.setItem(KEY_ITEM, key);
}

export function forgetApiKey() {
  sessionStorage.removeItem(KEY_ITEM);
}

/** `method path` with an optional JSON body; resolves to the parsed JSON (null for an empty body). Errors become
 * ApiError with the API's error code and message (the API's error shape: {"error": {"code", "message"}}). */
export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method, headers, cache: "no-store", credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = body instanceof RawJson ? body.text : JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    // Also a key that cannot be sent as a header (characters outside Latin-1).
    throw new ApiError(0, "network", `the request could not be sent: ${err.message}`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && data.error ? data.error : { code: String(response.status), message: text.trim() };
    const failure = new ApiError(response.status, error.code, error.message || response.statusText);
    if (response.status === 401) unauthorized(failure);
    throw failure;
  }
  return data;
}

/** The path of `/jobs/{id}` and the like, with the id percent-encoded. */
export function path(prefix, id) {
  return `${prefix}/${encodeURIComponent(id)}`;
}
