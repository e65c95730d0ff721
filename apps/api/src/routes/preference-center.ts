/**
 * The preference center: what the unsubscribe page (`unsubscribe.ts`) shows and does for a project with topics
 * (docs/guides/topics.md, preference center). Plain HTML forms, no script: each public topic is a checkbox of one
 * form (`action=preferences`, one `topic` field per checked box), and "unsubscribe from all" is a form of its own
 * (`action=unsubscribe_all`). A topic's email adds "unsubscribe from <topic>" (`action=unsubscribe_topic`).
 *
 * How a POST is read ({@link unsubscribeAction}): an RFC 8058 one-click POST, or one without `action`, leaves the
 * email's topic when the token carries one, and all marketing email otherwise (as before topics).
 *
 * @module
 */
import type { Preferences } from '@mailroom/feedback/preferences';

/** What a POST to the unsubscribe URL asks for. */
export type UnsubscribeAction = 'unsubscribe_all' | 'unsubscribe_topic' | 'preferences';

/**
 * Reads a POST's `action` field. @param topicToken - the token carries a topic (a topic's email).
 * @returns the action; an unknown value is taken as none.
 */
export function unsubscribeAction(
  body: Record<string, unknown> | undefined,
  oneClick: boolean,
  topicToken: boolean,
): UnsubscribeAction {
  const given = body?.action;
  if (!oneClick && (given === 'preferences' || given === 'unsubscribe_all' || given === 'unsubscribe_topic')) {
    return given === 'unsubscribe_topic' && !topicToken ? 'unsubscribe_all' : given;
  }
  return topicToken ? 'unsubscribe_topic' : 'unsubscribe_all';
}

/** The topic ids a preferences POST checked (`topic` fields: one string, or several). */
export function checkedTopics(body: Record<string, unknown> | undefined): Set<string> {
  const v = body?.topic;
  return new Set((Array.isArray(v) ? v : v === undefined ? [] : [v]).filter((x): x is string => typeof x === 'string'));
}

/**
 * The page's body for a contact (`prefs`), or `undefined` when the project has no public topic and the email no topic
 * (the page is then the plain one-button page).
 *
 * @param escape - the page's HTML escaper.
 */
export function preferenceCenterBody(
  email: string,
  prefs: Preferences | undefined,
  escape: (s: string) => string,
): string | undefined {
  if (!prefs || (prefs.topics.length === 0 && !prefs.emailTopic)) return undefined;
  const parts = [`<h1>Email preferences</h1><p>For <strong>${escape(email)}</strong>.</p>`];
  if (!prefs.subscribed) parts.push('<p>You are unsubscribed from all marketing email.</p>');
  if (prefs.emailTopic && prefs.emailTopic.subscribed && prefs.subscribed) {
    parts.push(
      `<form method="post"><input type="hidden" name="action" value="unsubscribe_topic">` +
        `<p>Stop email about <strong>${escape(prefs.emailTopic.name)}</strong>?</p><button type="submit">Unsubscribe from ${escape(prefs.emailTopic.name)}</button></form>`,
    );
  }
  if (prefs.topics.length > 0) {
    const boxes = prefs.topics.map(
      (t) =>
        `<label><input type="checkbox" name="topic" value="${escape(t.topicId)}"${t.subscribed ? ' checked' : ''}> ${escape(t.name)}</label>` +
        (t.description ? `<small>${escape(t.description)}</small>` : ''),
    );
    parts.push(
      `<form method="post"><input type="hidden" name="action" value="preferences"><fieldset><legend>Topics</legend>${boxes.join('')}</fieldset>` +
        `<button type="submit">Save preferences</button></form>`,
    );
  }
  if (prefs.subscribed) {
    parts.push(
      '<form method="post"><input type="hidden" name="action" value="unsubscribe_all"><button type="submit">Unsubscribe from all marketing email</button></form>',
    );
  }
  return parts.join('\n');
}

/** The page after saving: which topics the contact now receives. */
export function savedBody(prefs: Preferences | undefined, escape: (s: string) => string): string {
  const list = (prefs?.topics ?? [])
    .map((t) => `<li>${escape(t.name)}: ${t.subscribed ? 'subscribed' : 'unsubscribed'}</li>`)
    .join('');
  return `<h1>Preferences saved</h1>${list ? `<ul>${list}</ul>` : ''}`;
}
