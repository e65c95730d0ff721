/**
 * A lean SMTP submission client for `npm run bench -- smtp`, as an MTA's client talks to a relay: one session
 * (EHLO, STARTTLS when asked, `AUTH PLAIN` once), then per message one pipelined group `MAIL FROM`, `RCPT TO`,
 * `DATA` in a single write (RFC 2920, when the server advertises PIPELINING; one command at a time otherwise),
 * the message (dot-stuffed, RFC 5321 §4.5.2) and its final dot in a second write: two round trips a message, against
 * nodemailer's four. It composes nothing: the bench hands it the message's bytes. The HTTP side's load generator
 * (autocannon) is equally lean.
 *
 * @module
 */
import net from 'node:net';
import tls from 'node:tls';

/** A reply: its code and its lines' text (without the code). */
interface Reply {
  code: number;
  lines: string[];
}

/** An SMTP reply other than the one expected: the message was not accepted. */
export class SmtpReplyError extends Error {
  constructor(
    readonly code: number,
    text: string,
  ) {
    super(`${code} ${text}`);
  }
}

/** One authenticated session: {@link LeanSmtpSession.send} one message at a time. */
export class LeanSmtpSession {
  private socket: net.Socket;
  private buffered = '';
  private lines: string[] = [];
  private waiting: { resolve: (r: Reply) => void; reject: (e: Error) => void }[] = [];
  private replies: Reply[] = [];
  private failed: Error | undefined;
  private pipelining = false;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    this.listen(socket);
  }

  /**
   * Opens a session on 127.0.0.1:`port` and authenticates with `user`/`pass` (`AUTH PLAIN`, RFC 4616), after
   * STARTTLS (RFC 3207; any certificate) when `starttls`.
   *
   * @throws {@link SmtpReplyError} for a greeting, EHLO, STARTTLS or AUTH reply that is not the expected one (the
   *   connection is closed then); the socket's errors.
   */
  static async open(port: number, starttls: boolean, user: string, pass: string): Promise<LeanSmtpSession> {
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
    });
    socket.setNoDelay(true);
    const session = new LeanSmtpSession(socket);
    try {
      await session.expect(220);
      let features = await session.command('EHLO bench.test', 250);
      if (starttls) {
        await session.command('STARTTLS', 220);
        const secure = await new Promise<tls.TLSSocket>((resolve, reject) => {
          const t = tls.connect({ socket, rejectUnauthorized: false }, () => resolve(t));
          t.once('error', reject);
        });
        socket.removeAllListeners('data');
        session.socket = secure;
        session.listen(secure);
        features = await session.command('EHLO bench.test', 250);
      }
      session.pipelining = features.lines.some((l) => l.toUpperCase() === 'PIPELINING');
      await session.command(`AUTH PLAIN ${Buffer.from(`\0${user}\0${pass}`).toString('base64')}`, 235);
    } catch (err) {
      session.socket.destroy();
      throw err;
    }
    return session;
  }

  /**
   * Submits one message: `raw` (CRLF line ends) from `from` to `to`.
   *
   * @throws {@link SmtpReplyError} when the server refused the sender, the recipient, DATA or the message.
   */
  async send(from: string, to: string, raw: string): Promise<void> {
    const group = [`MAIL FROM:<${from}>`, `RCPT TO:<${to}>`, 'DATA'];
    let replies: Reply[];
    if (this.pipelining) {
      this.socket.write(group.map((c) => `${c}\r\n`).join(''));
      replies = [await this.next(), await this.next(), await this.next()];
    } else {
      replies = [];
      for (const c of group) {
        this.socket.write(`${c}\r\n`);
        const r = await this.next();
        replies.push(r);
        if (r.code >= 400) break;
      }
    }
    const bad = replies.find((r, i) => r.code !== (i === 2 ? 354 : 250));
    if (bad) {
      // A refused sender or recipient leaves a transaction open, or a DATA the server answered 354 to: end it.
      if (replies[2]?.code === 354) {
        this.socket.write('.\r\n');
        await this.next();
      } else await this.command('RSET', 250);
      throw new SmtpReplyError(bad.code, bad.lines.join(' '));
    }
    const body = raw.replace(/(^|\r\n)\./g, '$1..');
    this.socket.write(`${body}${body.endsWith('\r\n') ? '' : '\r\n'}.\r\n`);
    const done = await this.next();
    if (done.code !== 250) throw new SmtpReplyError(done.code, done.lines.join(' '));
  }

  /** Ends the session (QUIT, without waiting for its reply). */
  close(): void {
    this.socket.end('QUIT\r\n');
  }

  private listen(socket: net.Socket): void {
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => this.read(chunk));
    socket.once('error', (err) => this.fail(err));
    socket.once('close', () => this.fail(new Error('connection closed')));
  }

  private read(chunk: string): void {
    this.buffered += chunk;
    let nl: number;
    while ((nl = this.buffered.indexOf('\r\n')) >= 0) {
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 2);
      this.lines.push(line.slice(4));
      // The last line of a reply has a space after its code (RFC 5321 §4.2.1).
      if (line[3] === '-') continue;
      const reply = { code: Number(line.slice(0, 3)), lines: this.lines };
      this.lines = [];
      const w = this.waiting.shift();
      if (w) w.resolve(reply);
      else this.replies.push(reply);
    }
  }

  private fail(err: Error): void {
    this.failed ??= err;
    for (const w of this.waiting.splice(0)) w.reject(err);
  }

  private next(): Promise<Reply> {
    const r = this.replies.shift();
    if (r) return Promise.resolve(r);
    if (this.failed) return Promise.reject(this.failed);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  private async expect(code: number): Promise<Reply> {
    const r = await this.next();
    if (r.code !== code) throw new SmtpReplyError(r.code, r.lines.join(' '));
    return r;
  }

  private command(line: string, code: number): Promise<Reply> {
    this.socket.write(`${line}\r\n`);
    return this.expect(code);
  }
}
