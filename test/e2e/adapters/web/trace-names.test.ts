// Names in the trace API, end to end: the one pipeline against the fake Slack and the fake Discord,
// whose APIs say people's and channels' names. A session is titled by its first message and its
// place (`#channel · thread by <name>`, `DM with <name>`), people by their display names (asked of
// the platform once, with the bot's credentials, then kept), runs by their first line; the ids stay
// beside the names.
import { afterEach, describe, expect, it } from "vitest";
import * as discord from "../../../helpers/discord.js";
import * as slack from "../../../helpers/slack.js";

afterEach(async () => {
  await slack.cleanUp();
  await discord.cleanUp();
});

interface Named {
  id: string;
  title: string | null;
  placeName: string;
  userName?: string;
  startedBy: string | null;
}
interface SessionRuns extends Omit<Named, "id"> {
  runs: Array<{ title: string | null; userId: string; userName?: string }>;
}

const getJson = async <T>(url: string): Promise<T> => {
  const response = await fetch(url);
  expect(response.status).toBe(200);
  return (await response.json()) as T;
};

describe("names in the trace API", () => {
  it("Slack: a thread is '#<channel> · thread by <name>', a DM 'DM with <name>'; each name is asked once", async () => {
    const h = await slack.startHarness({ script: [{ content: "Fine." }, { content: "Also fine." }] });
    const { ts } = await h.mention(`<@${slack.BOT}> how is the build?\nmore detail on a second line`);
    await slack.waitForBotMessage(h.fake, slack.CHANNEL, ts, "Fine.");
    await h.dm("and the deploy?", { user: "U2" });
    await slack.waitForBotMessage(h.fake, "D1", undefined, "Also fine.");
    await h.slack.conversations.idle();
    const api = new URL("/api/", h.slack.apiUrl).href;

    const { sessions } = await getJson<{ sessions: Named[] }>(`${api}sessions`);
    const thread = `slack:${slack.TEAM}:${slack.CHANNEL}:${ts}`;
    expect(sessions.find((session) => session.id === thread)).toMatchObject({
      title: "how is the build?",
      placeName: "#channel-c1 · thread by user-u1",
      userName: "user-u1",
      startedBy: "U1",
    });
    expect(sessions.find((session) => session.id.includes(":D1:"))).toMatchObject({
      placeName: "DM with user-u2",
      userName: "user-u2",
      startedBy: "U2",
    });

    const view = await getJson<SessionRuns>(`${api}sessions/${encodeURIComponent(thread)}/runs`);
    expect(view).toMatchObject({ title: "how is the build?", placeName: "#channel-c1 · thread by user-u1" });
    expect(view.runs.map(({ title, userId, userName }) => ({ title, userId, userName }))).toEqual([
      { title: "how is the build?", userId: "U1", userName: "user-u1" },
    ]);
    // Read three times, asked once per person and channel.
    expect(
      h.fake
        .callsTo("users.info")
        .map((call) => call.args.user)
        .sort(),
    ).toEqual(["U1", "U2"]);
    expect(h.fake.callsTo("conversations.info").filter((call) => call.args.channel === slack.CHANNEL)).toHaveLength(1);
  });

  it("Discord: a channel is '#<name>', a DM 'DM with <name>', people by their server or own name", async () => {
    const h = await discord.startHarness({ script: [{ content: "Pong." }, { content: "Pong again." }] });
    await h.mention("ping from the channel");
    await discord.waitForBotMessage(h.fake, discord.CHANNEL, "Pong.");
    await h.dm("ping from a DM");
    await discord.waitForBotMessage(h.fake, discord.DM, "Pong again.");
    await h.discord.idle();
    const api = `${h.discord.roles.ingress?.api?.url}/api/`;

    const { sessions } = await getJson<{ sessions: Named[] }>(`${api}sessions`);
    const name = `user_${discord.USER.slice(-6)}`; // the fake's username for USER
    expect(sessions.find((session) => session.id === `discord:${discord.GUILD}:${discord.CHANNEL}`)).toMatchObject({
      title: "ping from the channel",
      placeName: "#general",
      userName: name,
      startedBy: discord.USER,
    });
    expect(sessions.find((session) => session.id === `discord:dm:${discord.DM}`)).toMatchObject({
      placeName: `DM with ${name}`,
      userName: name,
    });
    await getJson(`${api}sessions`);
    const asked = h.fake.requests.filter(
      (request) => request.method === "GET" && /\/(members|users)\/\d/.test(request.path),
    );
    expect(asked.map((request) => request.path).sort()).toEqual([
      `/guilds/${discord.GUILD}/members/${discord.USER}`,
      `/users/${discord.USER}`,
    ]);
  });
});
