// Approval cards of the chat page: what glassbox wants to run, Approve / Deny for the person who
// asked, and once decided (here, elsewhere, or by the clock) what was decided, by whom and when.
import { api, el, formatWhen, pretty } from "./common.js";

/**
 * `who()`: this browser's user id, which may change once the server names the token's user.
 * `watch` hears of a card that waits for a decision (`waiting`) and of one that no longer does (`settled`).
 */
export function createApprovalCards(who, watch = { waiting: () => {}, settled: () => {} }) {
  /** By approval id. */
  const cards = new Map();

  function show(activity, approval) {
    if (cards.has(approval.id)) return;
    const mine = approval.requester === who();
    const approve = el("button", { type: "button", class: "approve" }, "Approve");
    const deny = el("button", { type: "button", class: "deny" }, "Deny");
    const outcome = el("p", { class: "outcome", role: "status" });
    const buttons = el("div", { class: "buttons" }, approve, deny);
    const waiting = el(
      "p",
      { class: "expires" },
      `Nothing happens until someone decides. It expires at ${formatWhen(approval.expiresAt)}.`,
    );
    const titleId = `approval-${approval.id}`;
    // A call done in the requester's name (a note for the whole channel) is theirs to confirm.
    const confirms = approval.requesterConfirms === true;
    const title = el("h2", { id: titleId }, confirms ? "Confirmation needed" : "Approval needed");
    // The requester decides unless the policy says otherwise; others only when the policy names them.
    const mayDecide = mine
      ? confirms || approval.requesterMayApprove !== false
      : (approval.approvers ?? []).includes(who());
    const hint = confirms
      ? el(
          "p",
          { class: "hint" },
          mine
            ? "It is done in your name: approve it only if you asked for it."
            : `Only ${approval.requester}, in whose name it is done, can confirm it.`,
        )
      : mayDecide && approval.approvalsNeeded <= 1
        ? null
        : el("p", { class: "hint" }, `${approval.whoDecides}.`);
    const card = el(
      "section",
      { class: "approval", "aria-labelledby": titleId, "data-approval-id": approval.id },
      title,
      el(
        "p",
        {},
        confirms ? "glassbox would run " : "glassbox wants to run ",
        el("code", {}, approval.tool),
        confirms
          ? mine
            ? " in your name:"
            : ` in ${approval.requester}'s name:`
          : mine
            ? " for you:"
            : ` for ${approval.requester}:`,
      ),
      el("pre", { class: "arguments" }, pretty(approval.arguments)),
      waiting,
      buttons,
      hint,
      outcome,
    );
    if (!mayDecide) approve.disabled = deny.disabled = true;
    const decide = async (approved) => {
      approve.disabled = deny.disabled = true;
      outcome.textContent = approved ? "Approving…" : "Denying…";
      try {
        const answer = await api(`/api/approvals/${encodeURIComponent(approval.id)}`, {
          method: "POST",
          body: { approved, userId: who() },
        });
        if (answer.outcome === "counted") {
          const { approvedBy, approvalsNeeded } = answer.approval;
          outcome.textContent = `Your approval is counted: ${approvedBy.length} of ${approvalsNeeded}; it waits for someone else's.`;
        } else decided(answer.approval);
      } catch (error) {
        outcome.textContent = error.message;
        outcome.classList.add("error");
        if (error.status !== 409) approve.disabled = deny.disabled = false;
      }
    };
    approve.addEventListener("click", () => void decide(true));
    deny.addEventListener("click", () => void decide(false));
    cards.set(approval.id, { card, title, buttons, waiting, hint, outcome });
    activity.append(el("li", { class: "approval-item" }, card));
    if (approval.status === "pending") watch.waiting(card);
  }

  /** The card says what was decided, by whom and when, in place of the buttons and "Nothing happens…". */
  function decided(approval) {
    const shown = cards.get(approval.id);
    if (!shown || approval.status === "pending") return;
    const [title, text] = decisionOf(approval, who());
    shown.title.textContent = title;
    shown.buttons.remove();
    shown.waiting.remove();
    shown.hint?.remove();
    shown.outcome.classList.remove("error");
    shown.outcome.textContent = text;
    shown.card.classList.add(`decided-${approval.status}`);
    watch.settled(shown.card);
  }

  return { show, decided, clear: () => cards.clear() };
}

/** The card's new title and its sentence. */
function decisionOf(approval, userId) {
  const by = approval.decidedBy === userId ? "you" : approval.decidedBy;
  const when = formatWhen(approval.decidedAt);
  if (approval.status === "approved") return ["Approved", `✓ Approved by ${by} at ${when}.`];
  if (approval.status === "denied") return ["Denied", `✗ Denied by ${by} at ${when}; it was not run.`];
  if (approval.decidedBy === "superseded")
    return [
      "No longer needed",
      `A newer message at ${when} moved the conversation on before anyone decided; it was not run.`,
    ];
  return ["Expired", `Expired at ${when}: nobody decided in time, so it was not run.`];
}
