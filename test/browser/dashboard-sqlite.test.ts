import { dashboardSuite } from './dashboard-suite.js';

dashboardSuite('sqlite');
