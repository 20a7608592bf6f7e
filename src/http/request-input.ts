/**
 * Reading request input: JSON bodies, path ids and query strings, each refused with a 400 that
 * names the field, before any store is touched.
 */
import type { Context } from 'hono';
import type { z } from 'zod';
import { jobId } from '../job/list-params.js';
import { badRequest, fromZodError, HttpError } from './http-error.js';

/** The request's JSON body, unvalidated; 415 for another media type, 400 for malformed JSON. */
export async function readJson(c: Context): Promise<unknown> {
  const type = c.req.header('content-type');
  if (type !== undefined && !/^application\/([a-z.+-]*\+)?json\b/i.test(type.trim())) {
    throw new HttpError(415, 'unsupported_media_type', `body must be application/json, got ${type.slice(0, 80)}`);
  }
  const text = await c.req.text();
  if (text.trim() === '') throw badRequest('body', 'must be a JSON document, got an empty body');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new HttpError(
      400,
      'invalid_json',
      `body is not valid JSON: ${(error as Error).message.slice(0, 200)}`,
      'body',
    );
  }
}

/** The JSON body validated by `schema`. */
export async function readBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const value = await readJson(c);
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw fromZodError(parsed.error);
  return parsed.data;
}

/**
 * A job id from the path, by the one job-id rule the library and the CLI apply
 * (src/job/list-params.ts): a bad one is a 400 naming `name`, with the library's message.
 */
export function jobIdParam(c: Context, name = 'id'): string {
  return jobId(c.req.param(name) ?? '', name);
}

/** The query string validated by `schema` (strict schemas turn unknown parameters into 400s). */
export function readQuery<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  const raw: Record<string, string> = {};
  for (const [key, value] of new URL(c.req.url).searchParams) {
    if (key in raw) throw badRequest(key, 'is given more than once; separate several values with commas');
    raw[key] = value;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw fromZodError(parsed.error);
  return parsed.data;
}
