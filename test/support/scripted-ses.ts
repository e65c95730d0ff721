/**
 * A mail transport the test scripts, for the send path's tests without SES: one-message sends succeed with the
 * message id `ses-one-<email id>`; a bulk call's entries succeed with `ses-bulk-<email id>`, unless `entryStatus`
 * names an error for the email's entry or `callError` fails the whole next call. It records what it was given, and
 * answers `sendRate` with `rate` (unset: not known).
 */
import type { MailTransport, OutboundMessage } from '@mailroom/sending/ses/transport';
import type { BulkEntryOutcome, BulkOutbound } from '@mailroom/sending/ses/bulk-send';

/** The scripted transport (see the module notes); reset its fields between tests with {@link resetScriptedSes}. */
export function scriptedSes() {
  const t = {
    /** Thrown by the next bulk call, then cleared. */
    callError: undefined as Error | undefined,
    /** Email id → the error name its bulk entry answers (else SUCCESS). */
    entryStatus: new Map<string, string>(),
    /** The connection's send rate (emails/s); unset: not known. */
    rate: undefined as number | undefined,
    calls: [] as BulkOutbound[],
    sent: [] as OutboundMessage[],
    sendRate: () => t.rate,
    send(m: OutboundMessage) {
      t.sent.push(m);
      return Promise.resolve({ messageId: `ses-one-${m.tags?.email_id}` });
    },
    sendBulk(call: BulkOutbound): Promise<{ outcomes: BulkEntryOutcome[] }> {
      t.calls.push(call);
      const error = t.callError;
      t.callError = undefined;
      if (error) return Promise.reject(error);
      return Promise.resolve({
        outcomes: call.entries.map((e): BulkEntryOutcome => {
          const status = t.entryStatus.get(e.tags.email_id);
          if (!status) return { messageId: `ses-bulk-${e.tags.email_id}` };
          return { error: Object.assign(new Error(`entry ${status}`), { name: status }) };
        }),
      });
    },
    close() {},
  };
  return t satisfies MailTransport;
}

/** Clears what a {@link scriptedSes} transport recorded and was told to answer. */
export function resetScriptedSes(t: ReturnType<typeof scriptedSes>): void {
  t.callError = undefined;
  t.entryStatus.clear();
  t.rate = undefined;
  t.calls = [];
  t.sent = [];
}
