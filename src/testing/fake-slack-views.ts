// Modals for the fake Slack: `views.open` as Slack checks it (a trigger_id from an interaction,
// used once, within 3 seconds; a modal view with a title, at most 100 blocks, a callback_id and
// private_metadata within Slack's limits), the views it opened, and the `view_submission`
// payload Slack sends when a person submits one, with the values they typed in its inputs.
import { randomBytes } from "node:crypto";

type Args = Record<string, unknown>;
type Reply = Record<string, unknown>;

/** Slack's documented life of a trigger_id. */
const TRIGGER_TTL_MS = 3_000;

export interface FakeView {
  id: string;
  userId: string;
  callbackId: string;
  privateMetadata: string;
  view: Args;
}

export interface ViewSubmissionInput {
  viewId: string;
  /** Who submits (the fake requires it to be who opened the view, as only they see it). */
  userId: string;
  /** What they typed, by block_id and action_id. */
  values: Record<string, Record<string, string>>;
}

export function createViewMethods(teamId: string, appId: string) {
  const triggers = new Map<string, { userId: string; at: number }>();
  const views: FakeView[] = [];

  return {
    views,
    /** A trigger for an interaction of `userId`, as a payload carries it. */
    issueTrigger(userId: string): string {
      const id = `${Date.now()}.${randomBytes(4).readUInt32BE()}.${randomBytes(16).toString("hex")}`;
      triggers.set(id, { userId, at: Date.now() });
      return id;
    },
    methods: {
      "views.open": (a: Args): Reply => {
        const trigger = typeof a.trigger_id === "string" ? triggers.get(a.trigger_id) : undefined;
        if (!trigger) return { ok: false, error: "invalid_trigger_id" };
        triggers.delete(a.trigger_id as string);
        if (Date.now() - trigger.at > TRIGGER_TTL_MS) return { ok: false, error: "expired_trigger_id" };
        const view = (typeof a.view === "object" && a.view !== null ? a.view : {}) as Args;
        const title = (view.title as { text?: unknown } | undefined)?.text;
        const blocks = Array.isArray(view.blocks) ? view.blocks : [];
        const metadata = typeof view.private_metadata === "string" ? view.private_metadata : "";
        if (
          view.type !== "modal" ||
          typeof title !== "string" ||
          title.length > 24 ||
          blocks.length > 100 ||
          metadata.length > 3000
        )
          return { ok: false, error: "invalid_arguments" };
        const id = `V${randomBytes(5).toString("hex").toUpperCase()}`;
        views.push({
          id,
          userId: trigger.userId,
          callbackId: typeof view.callback_id === "string" ? view.callback_id : "",
          privateMetadata: metadata,
          view,
        });
        return { ok: true, view: { id, team_id: teamId, app_id: appId, ...view } };
      },
    },
    /** The payload Slack posts when the person submits the view. */
    submissionPayload(input: ViewSubmissionInput): Args {
      const opened = views.find((view) => view.id === input.viewId);
      if (!opened) throw new Error(`fake-slack: no view ${input.viewId} was opened`);
      if (opened.userId !== input.userId)
        throw new Error(`fake-slack: view ${input.viewId} was opened for ${opened.userId}; only they can submit it`);
      const values = Object.fromEntries(
        Object.entries(input.values).map(([blockId, inputs]) => [
          blockId,
          Object.fromEntries(
            Object.entries(inputs).map(([actionId, value]) => [actionId, { type: "plain_text_input", value }]),
          ),
        ]),
      );
      return {
        type: "view_submission",
        team: { id: teamId, domain: teamId.toLowerCase() },
        user: {
          id: input.userId,
          username: `user-${input.userId.toLowerCase()}`,
          name: `user-${input.userId.toLowerCase()}`,
          team_id: teamId,
        },
        api_app_id: appId,
        token: "fake-verification-token",
        trigger_id: `${Date.now()}.${randomBytes(4).readUInt32BE()}.${randomBytes(16).toString("hex")}`,
        view: {
          ...opened.view,
          id: opened.id,
          team_id: teamId,
          app_id: appId,
          bot_id: "B0FAKEBOT1",
          callback_id: opened.callbackId,
          private_metadata: opened.privateMetadata,
          hash: randomBytes(8).toString("hex"),
          state: { values },
        },
        response_urls: [],
        is_enterprise_install: false,
        enterprise: null,
      };
    },
  };
}
