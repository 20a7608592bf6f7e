/**
 * OpenTelemetry spans through `@opentelemetry/api` only: when the user registers no provider the
 * API hands out no-op spans and this costs next to nothing; when they do, HTTP requests and
 * webhook deliveries appear in their traces.
 */
import { type Attributes, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

const tracer = () => trace.getTracer('docket', '0.1.0');

/** Runs `fn` inside an active span, recording an exception and an error status if it throws. */
export async function withSpan<T>(
  name: string,
  kind: 'server' | 'client',
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return tracer().startActiveSpan(
    name,
    { kind: kind === 'server' ? SpanKind.SERVER : SpanKind.CLIENT, attributes },
    async (span) => {
      try {
        return await fn(span);
      } catch (error) {
        span.recordException(error as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}
