import { describe, expect, it } from 'vitest';
import { browserMissingReason } from './browser-support.js';

describe('the browser tests without chromium', () => {
  it('fail in CI instead of skipping', () => {
    expect(() => browserMissingReason('/nonexistent/chromium', { CI: 'true' })).toThrow(
      'chromium is not installed at /nonexistent/chromium (apt-get install -y chromium); with CI=true the browser tests must run',
    );
  });

  it('skip locally, saying why', () => {
    expect(browserMissingReason('/nonexistent/chromium', {})).toBe(
      'chromium is not installed at /nonexistent/chromium (apt-get install -y chromium)',
    );
  });
});
