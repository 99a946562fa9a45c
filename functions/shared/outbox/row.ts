/**
 * The outbox row as the relay claims it: the columns every job reads before it loads a payload. A leaf of the
 * event contract, so destinations, the publisher and the claim all name one type.
 */
export interface ClaimedRow {
  id: string;
  seq: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  attempts: number;
  /** Tries that failed on SQS's side (outage, throttling, InternalError); they never dead-letter. */
  transient_failures: number;
  /**
   * As node-postgres parses timestamptz: a Date, but `Infinity`/`-Infinity` for 'infinity' and an invalid Date
   * beyond JavaScript's range (a hand-inserted row); the publisher checks it.
   */
  created_at: Date | number;
  /**
   * Set (to available_at as text) when the row asks to wait more than MAX_DELAY_MS (message.ts) ('infinity', years ahead):
   * claimed so it can be dead-lettered as malformed instead of blocking its group forever.
   */
  delayed_beyond?: string | null;
  /**
   * The producer's W3C trace context (migration 0013; the insert trigger checked its shape): small, so the claim
   * returns it beside the ids, and a publish span can link the events' traces before their payloads load.
   */
  traceparent?: string | null;
  tracestate?: string | null;
}
