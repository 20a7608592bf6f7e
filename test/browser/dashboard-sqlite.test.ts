import { dashboardSuite, noDoneRecordsSuite } from './dashboard-suite.js';

dashboardSuite('sqlite');
// One store is enough: the note reads the server's setting, not the store.
noDoneRecordsSuite('sqlite');
