import { afterEach, it } from "vitest";
import { cleanUp, startHarness, toolCall, WAIT } from "./slack-helpers.js";
import { expect } from "vitest";
afterEach(cleanUp);
for (const refuse of [["assistant.threads.setStatus"], ["chat.startStream"], []])
it("probe " + refuse, async () => {
  const h = await startHarness({ script: [
    { content: "Your **order** is delivered." },
  ], fake: { refuse } });
  const { ts } = await h.mention("<@U0FAKEBOT1> where is my order");
  await expect.poll(() => h.model.requests.length, WAIT).toBe(1);
  await h.slack.conversations.idle();
  for (const c of h.fake.calls) console.log(c.method, JSON.stringify(c.args).slice(0, 200));
  console.log(h.fake.messages("C1", ts));
  console.log(h.lines.map((l) => l.msg));
});
