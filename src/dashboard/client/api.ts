/**
 * The dashboard's only way to the server: the public JSON API and its event stream, with the
 * operator's token in the `Authorization` header. The token lives in this tab's sessionStorage
 * (gone when the tab closes) and never in a URL or a cookie: a cookie would be sent by the
 * browser on a cross-site request the API would then trust, a URL ends up in logs and history.
 */

const TOKEN_KEY = 'docket.dashboard.token';

/** An API answer that was not 2xx: its status and the API's error body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

/** The server wants a token (401): the page asks for one. */
export class TokenNeededError extends ApiError {}

/** What the current token may do, from GET /v1/whoami. */
export interface Principal {
  name: string;
  scopes: string[];
  /** False when the server has no tokens (loopback only): every request is trusted. */
  authenticated: boolean;
}

/** The API's root: the page names it relative to itself, so any mount prefix works. */
export function apiBase(): URL {
  const meta = document.querySelector('meta[name="docket-api-base"]');
  return new URL(meta?.getAttribute('content') ?? './', document.baseURI);
}

/** The stored token, if the operator gave one in this tab. */
export function storedToken(): string | null {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return memoryToken;
  }
}
let memoryToken: string | null = null;

/** Keeps `token` for this tab (sessionStorage, or memory where storage is blocked). */
export function storeToken(token: string | null): void {
  memoryToken = token;
  try {
    if (token === null) sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, token);
  } catch {
    // Storage blocked (private mode, policy): the token stays in memory until the tab closes.
  }
}

function headers(extra: Record<string, string> = {}): Headers {
  const result = new Headers({ accept: 'application/json', ...extra });
  const token = storedToken();
  if (token !== null) result.set('authorization', `Bearer ${token}`);
  return result;
}

/** A query string from defined, non-empty values only. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  }
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}

async function failure(response: Response): Promise<ApiError> {
  let code = 'http_error';
  let message = `${response.status} ${response.statusText}`;
  let field: string | undefined;
  try {
    const body = (await response.json()) as { error?: { code?: string; message?: string; field?: string } };
    code = body.error?.code ?? code;
    message = body.error?.message ?? message;
    field = body.error?.field;
  } catch {
    // Not JSON (a proxy's page): the status line says enough.
  }
  return response.status === 401
    ? new TokenNeededError(401, code, message, field)
    : new ApiError(response.status, code, message, field);
}

/** Calls the API: `path` relative to its root (`v1/jobs`), a JSON body for writes. */
export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(new URL(path, apiBase()), {
    method,
    headers: headers(body === undefined ? {} : { 'content-type': 'application/json' }),
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (!response.ok) throw await failure(response);
  return (await response.json()) as T;
}

/** GET `path`. */
export function get<T>(path: string): Promise<T> {
  return call<T>('GET', path);
}

/** POST `path` with a JSON body (an empty object when none: writes must be JSON). */
export function post<T>(path: string, body: unknown = {}): Promise<T> {
  return call<T>('POST', path, body);
}

/** One server-sent event. */
export interface StreamEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * Reads a server-sent-event stream with fetch() (EventSource cannot send an Authorization
 * header), calling `onEvent` per event until `signal` aborts or the server ends it.
 */
export async function stream(path: string, onEvent: (event: StreamEvent) => void, signal: AbortSignal): Promise<void> {
  const response = await fetch(new URL(path, apiBase()), {
    headers: headers({ accept: 'text/event-stream' }),
    credentials: 'omit',
    cache: 'no-store',
    signal,
  });
  if (!response.ok || response.body === null) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let event = 'message';
  let data: string[] = [];
  let id: string | undefined;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let newline = buffer.search(/\r?\n/);
    while (newline >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(buffer[newline] === '\r' ? newline + 2 : newline + 1);
      if (line === '') {
        if (data.length > 0) onEvent({ event, data: data.join('\n'), id });
        event = 'message';
        data = [];
      } else if (!line.startsWith(':')) {
        const colon = line.indexOf(':');
        const name = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (name === 'event') event = text;
        else if (name === 'data') data.push(text);
        else if (name === 'id') id = text;
      }
      newline = buffer.search(/\r?\n/);
    }
  }
}

/** What this token may do (GET /v1/whoami): the page hides the actions it lacks. */
export function whoami(): Promise<Principal> {
  return get<Principal>('v1/whoami');
}
