// The channel settings' budgets as they stand this month (GET /api/usage's `budgets`): shown above the
// sessions when the deployment has channel settings, each with whose it is, what was used and the share.
import { api, el, formatNumber } from "./common.js";

const amount = (budget, value) =>
  budget.unit === "cost" ? `$${value.toFixed(2)}` : `${formatNumber(Math.round(value))} tokens`;

/** Fills `panel` (a <details>) from the API; hidden when there are no channel settings or nothing could be read. */
export async function showBudgets(panel) {
  let budgets;
  try {
    ({ budgets } = await api("/api/usage"));
  } catch {
    budgets = undefined;
  }
  panel.hidden = budgets === undefined;
  if (budgets === undefined) return;
  const rows = budgets.map((budget) => {
    const share = budget.limit > 0 ? Math.min(100, Math.floor((budget.used / budget.limit) * 100)) : 100;
    return el(
      "tr",
      { class: share >= 100 ? "over" : share >= 80 ? "nearing" : "" },
      el("th", { scope: "row" }, `${budget.scope} ${budget.period}`),
      el("td", { class: "whose", title: budget.of }, budget.of),
      el("td", {}, `${amount(budget, budget.used)} of ${amount(budget, budget.limit)}`),
      el(
        "td",
        {},
        el("meter", { min: "0", max: "100", low: "80", high: "99", optimum: "0", value: String(share) }),
        ` ${share}%`,
      ),
    );
  });
  const body = panel.querySelector("tbody");
  body.replaceChildren(
    ...(rows.length > 0
      ? rows
      : [el("tr", {}, el("td", { colspan: "4" }, "Nothing spent against a budget this month."))]),
  );
}
