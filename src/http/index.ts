/**
 * The service face's public surface, imported as `docket/http` so that the library entry point
 * does not load the HTTP framework, metrics and logging for users who only embed workers.
 */
export type { AppConfig, DocketApp, RunningServer, StartServerOptions } from './server.js';
export { createApp, loadServerConfig, startServer } from './server.js';
export type { LoadServerConfigInput, ServerConfig } from './server-config.js';
export type { WebhookHandlerOptions, WebhookPayload } from './webhook-handler.js';
export { registerWebhookHandler, WEBHOOK_KIND } from './webhook-handler.js';
export { signWebhook, verifyWebhookSignature } from './webhook-signature.js';
