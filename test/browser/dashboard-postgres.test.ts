import { describe, it } from 'vitest';
import { storeKinds } from '../support/stores.js';
import { dashboardSuite } from './dashboard-suite.js';

// PostgreSQL is left out only on the explicit local opt-out (storeKinds); in CI it must run.
if (storeKinds().includes('postgres')) dashboardSuite('postgres');
else describe.skip('dashboard in chromium on postgres (skipped: DOCKET_SKIP_POSTGRES=1)', () => it('runs', () => {}));
