/**
 * redactStoreUrl, the one masking of store URLs that the CLI's messages and `docket serve`'s
 * "cannot open the store" error share: a password never reaches a log line.
 */
import { describe, expect, it } from 'vitest';
import { redactStoreUrl } from '../../src/store/open-store.js';

describe('redactStoreUrl', () => {
  it('masks a PostgreSQL password and keeps the rest of the URL', () => {
    const shown = redactStoreUrl('postgres://app:s3cret@db.internal:5433/jobs?schema=docket');
    expect(shown).toBe('postgres://app:***@db.internal:5433/jobs?schema=docket');
    expect(shown).not.toContain('s3cret');
  });

  it('leaves URLs without a password, SQLite URLs and unparsable text as they are', () => {
    expect(redactStoreUrl('postgres://postgres@127.0.0.1:5432/test')).toBe('postgres://postgres@127.0.0.1:5432/test');
    expect(redactStoreUrl('sqlite:/var/lib/docket.db')).toBe('sqlite:/var/lib/docket.db');
    expect(redactStoreUrl('not a url')).toBe('not a url');
  });
});
