/**
 * The OpenAPI document is valid 3.1: `redocly lint` reports no error, swagger-parser validates
 * and dereferences it, every operation has an id, and live responses of every route, on both
 * stores, match the schemas the document gives for their status.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv2020Module from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../../src/http/openapi.js';
import { RFC3339_INSTANT_PATTERN } from '../../src/job/instant.js';
import { storeKinds } from '../support/stores.js';
import { startHostileServer } from './hostile-support.js';
import { type TestServer, TOKENS } from './http-support.js';

type Doc = { paths: Record<string, Record<string, { operationId?: string; responses: Record<string, unknown> }>> };
const REPO_ROOT = resolve(import.meta.dirname, '../..');
// ajv ships CommonJS: under NodeNext its class is the default export's `default`.
const Ajv2020 = (Ajv2020Module as unknown as { default: typeof Ajv2020Module.default }).default;

describe('the OpenAPI document', () => {
  const document = openApiDocument();
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docket-openapi-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes redocly lint with zero errors', async () => {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(document));
    const result = await new Promise<{ code: number; output: string }>((done) => {
      execFile(
        join(REPO_ROOT, 'node_modules/.bin/redocly'),
        ['lint', file, '--format=json'],
        { cwd: dir, env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } },
        (error, stdout, stderr) => done({ code: error ? Number(error.code ?? 1) : 0, output: `${stdout}${stderr}` }),
      );
    });
    const start = result.output.indexOf('{');
    const report = JSON.parse(result.output.slice(start, result.output.lastIndexOf('}') + 1)) as {
      totals: { errors: number };
      problems: { severity: string; message: string }[];
    };
    expect(report.problems.filter((p) => p.severity === 'error')).toEqual([]);
    expect(report.totals.errors).toBe(0);
    expect(result.code).toBe(0);
  }, 60_000);

  it('validates and dereferences with swagger-parser: every $ref resolves from the root', async () => {
    const api = await SwaggerParser.validate(structuredClone(document) as never);
    expect((api as { openapi: string }).openapi).toBe('3.1.0');
    expect(JSON.stringify(document)).not.toContain('#/$defs/');
    expect(document.servers).toEqual([expect.objectContaining({ url: '/' })]);
  });

  it('gives every operation a unique operationId', () => {
    const ids = Object.values((document as Doc).paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBeGreaterThanOrEqual(28);
  });
});

for (const kind of storeKinds()) {
  describe(`live responses match the document (${kind})`, () => {
    const document = openApiDocument() as Doc;
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addFormat('date-time', RFC3339_INSTANT_PATTERN);
    ajv.addSchema({ ...document, $id: 'docket-openapi' });
    let t: TestServer;
    const checked = new Set<string>();
    beforeAll(async () => {
      t = await startHostileServer(kind);
    });
    afterAll(async () => {
      await t?.stop();
    });

    /** Calls a route and validates its JSON answer against `paths[template][method].responses[status]`. */
    const check = async (method: string, template: string, path: string, body?: unknown, token?: string) => {
      const response = await t.call(method, path, { body, ...(token ? { token } : {}) });
      const operation = document.paths[template]?.[method.toLowerCase()];
      expect(operation, `${method} ${template} is documented`).toBeDefined();
      const status = String(response.status);
      expect(Object.keys(operation?.responses ?? {}), `${method} ${template} documents ${status}`).toContain(status);
      const pointer = `docket-openapi#/paths/${template.replaceAll('~', '~0').replaceAll('/', '~1')}/${method.toLowerCase()}/responses/${status}`;
      const responseObject = operation?.responses[status] as { content?: Record<string, { schema: unknown }> };
      if (responseObject.content?.['application/json']) {
        const validate = ajv.compile({ $ref: `${pointer}/content/application~1json/schema` });
        expect(validate(response.body), `${method} ${path} ${status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
      }
      checked.add(`${method.toLowerCase()} ${template}`);
      return response.body as Record<string, unknown>;
    };

    it('every route answers in the shape its operation documents', async () => {
      const submitted = await check('POST', '/v1/jobs', '/v1/jobs', { kind: 'doc.job', queue: 'doc', maxAttempts: 1 });
      await check('POST', '/v1/jobs/batch', '/v1/jobs/batch', { jobs: [{ kind: 'doc.batch', queue: 'doc2' }] });
      await check('GET', '/v1/jobs', '/v1/jobs?limit=10');
      await check('GET', '/v1/jobs/{id}', `/v1/jobs/${submitted.id}`);
      await check('GET', '/v1/jobs/{id}', '/v1/jobs/99999999');
      await check('POST', '/v1/jobs', '/v1/jobs', { kind: 'doc.job', runAt: 'soon' });
      const claim = await check('POST', '/v1/worker/claim', '/v1/worker/claim', { workerId: 'doc-w', queues: ['doc'] });
      const [job] = claim.jobs as { id: string; token: number; receipt: string }[];
      const lease = { token: job?.token, receipt: job?.receipt };
      await check('POST', '/v1/worker/jobs/{id}/heartbeat', `/v1/worker/jobs/${job?.id}/heartbeat`, lease);
      await check('POST', '/v1/worker/jobs/{id}/fail', `/v1/worker/jobs/${job?.id}/fail`, {
        ...lease,
        error: { message: 'doc' },
      });
      await check('POST', '/v1/worker/jobs/{id}/complete', `/v1/worker/jobs/${job?.id}/complete`, lease);
      const second = await check('POST', '/v1/worker/claim', '/v1/worker/claim', {
        workerId: 'doc-w',
        queues: ['doc2'],
      });
      const [other] = second.jobs as { id: string; token: number; receipt: string }[];
      await check('POST', '/v1/worker/jobs/{id}/complete', `/v1/worker/jobs/${other?.id}/complete`, {
        token: other?.token,
        receipt: other?.receipt,
      });
      await check('GET', '/v1/jobs/{id}/detail', `/v1/jobs/${job?.id}/detail`);
      await check('GET', '/v1/jobs/{id}/detail', '/v1/jobs/99999999/detail');
      await check('GET', '/v1/jobs', '/v1/jobs?payload=payload.customerId%20%3D%3D%2042');
      await check('GET', '/v1/overview', '/v1/overview');
      await check('GET', '/v1/activity', '/v1/activity?minutes=5');
      await check('POST', '/v1/bulk/preview', '/v1/bulk/preview', { action: 'retry', filter: { queue: 'doc' } });
      const started = await check('POST', '/v1/bulk', '/v1/bulk', { action: 'retry', filter: { queue: 'doc' } });
      await check('GET', '/v1/bulk/{id}', `/v1/bulk/${started.id}`);
      await check('GET', '/v1/bulk/{id}', '/v1/bulk/op-unknown');
      await check('GET', '/v1/bulk', '/v1/bulk');
      await check('POST', '/v1/bulk', '/v1/bulk', { action: 'reschedule', filter: { queue: 'doc' } });
      await check('GET', '/v1/dead-letters', '/v1/dead-letters');
      await check('POST', '/v1/dead-letters/{id}/retry', `/v1/dead-letters/${job?.id}/retry`);
      await check('POST', '/v1/jobs/{id}/cancel', `/v1/jobs/${job?.id}/cancel`);
      await check('POST', '/v1/dead-letters/purge', '/v1/dead-letters/purge', { ids: ['1'] });
      await check('GET', '/v1/stats', '/v1/stats');
      await check('GET', '/v1/workers', '/v1/workers');
      const schedule = { id: 'doc-s', cron: '0 * * * *', job: { kind: 'doc.scheduled' } };
      await check('POST', '/v1/schedules', '/v1/schedules', schedule);
      await check('GET', '/v1/schedules', '/v1/schedules');
      await check('GET', '/v1/schedules/{id}', '/v1/schedules/doc-s');
      await check('PUT', '/v1/schedules/{id}', '/v1/schedules/doc-s', {
        cron: '5 * * * *',
        job: { kind: 'doc.scheduled' },
      });
      await check('POST', '/v1/schedules/{id}/run-now', '/v1/schedules/doc-s/run-now');
      await check('POST', '/v1/schedules/{id}/pause', '/v1/schedules/doc-s/pause');
      await check('POST', '/v1/schedules/{id}/resume', '/v1/schedules/doc-s/resume');
      await check('DELETE', '/v1/schedules/{id}', '/v1/schedules/doc-s');
      await check('POST', '/v1/queues/{name}/pause', '/v1/queues/doc/pause');
      await check('POST', '/v1/queues/{name}/resume', '/v1/queues/doc/resume');
      await check('GET', '/v1/queues', '/v1/queues');
      await check('GET', '/health', '/health');
      await check('GET', '/ready', '/ready');
      await check('GET', '/openapi.json', '/openapi.json');
      await check('GET', '/metrics', '/metrics');
      // The stream never ends by itself: its status and media type are checked without reading it to the end.
      const aborter = new AbortController();
      const stream = await fetch(`${t.url}/v1/events?intervalMs=1000`, {
        signal: aborter.signal,
        headers: { authorization: `Bearer ${TOKENS.all.token}` },
      });
      expect(stream.status).toBe(200);
      expect(stream.headers.get('content-type')).toContain('text/event-stream');
      aborter.abort();
      checked.add('get /v1/events');
      const documented = Object.entries(document.paths).flatMap(([path, ops]) =>
        Object.keys(ops).map((method) => `${method} ${path}`),
      );
      expect([...checked].sort()).toEqual(documented.sort());
    });
  });
}
