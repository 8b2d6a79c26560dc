// The trace viewer's chart: prompt tokens per step, run after run. Steady growth is the whole
// conversation being sent again each step; a step where memory folded older turns into a summary
// is marked, and usually shows as a drop.
import { el, formatNumber, svg } from "./common.js";

const BAR = 22;
const GAP = 8;
const RUN_GAP = 18;
const LEFT = 56;
const TOP = 30;
const PLOT = 160;

/** `groups`: [{ label, steps }] in order; `foldAt(runId, step)`: the folds made for that step. */
export function promptChart(groups, foldAt) {
  const points = groups.flatMap((group) =>
    group.steps.map((step) => ({
      label: group.label,
      runId: step.runId,
      step: step.step,
      tokens: step.promptTokens,
      folds: foldAt(step.runId, step.step),
    })),
  );
  if (points.length === 0) return el("p", { class: "empty" }, "No steps recorded yet.");
  const max = Math.max(...points.map((point) => point.tokens), 1);
  const height = TOP + PLOT + 34;
  let x = LEFT + GAP;
  let previous = null;
  const bars = [];
  const labels = [];
  for (const point of points) {
    if (point.label !== previous) {
      if (previous !== null) {
        x += RUN_GAP;
        const between = x - RUN_GAP / 2 - GAP / 2;
        labels.push(svg("line", { class: "run-separator", x1: between, x2: between, y1: TOP - 20, y2: TOP + PLOT }));
      }
      labels.push(svg("text", { class: "run-label", x, y: TOP - 16 }, point.label));
      previous = point.label;
    }
    const barHeight = Math.max(1, Math.round((point.tokens / max) * PLOT));
    const folded = point.folds.length > 0;
    const title = `${point.label}, step ${point.step}: ${formatNumber(point.tokens)} prompt tokens${folded ? "; memory folded older turns into a summary before this step" : ""}`;
    bars.push(
      svg(
        "rect",
        {
          class: folded ? "bar folded" : "bar",
          x,
          y: TOP + PLOT - barHeight,
          width: BAR,
          height: barHeight,
          rx: 2,
          "data-run-id": point.runId,
          "data-step": point.step,
          "data-tokens": point.tokens,
        },
        svg("title", {}, title),
      ),
      svg(
        "text",
        { class: "step-label", x: x + BAR / 2, y: TOP + PLOT + 16, "text-anchor": "middle" },
        String(point.step),
      ),
    );
    // The fold's mark: a downward triangle above the bar.
    if (folded) {
      const top = TOP + PLOT - barHeight - 4;
      bars.push(
        svg(
          "path",
          {
            class: "fold-mark",
            d: `M${x + 3} ${top - 9} L${x + BAR - 3} ${top - 9} L${x + BAR / 2} ${top} Z`,
            "data-step": point.step,
          },
          svg("title", {}, title),
        ),
      );
    }
    x += BAR + GAP;
  }
  const width = Math.max(x + GAP, 320);
  const grid = [0, 0.5, 1].map((fraction) => {
    const y = TOP + PLOT - fraction * PLOT;
    return [
      svg("line", { class: "grid", x1: LEFT, x2: width, y1: y, y2: y }),
      svg(
        "text",
        { class: "axis-label", x: LEFT - 6, y: y + 4, "text-anchor": "end" },
        formatNumber(Math.round(max * fraction)),
      ),
    ];
  });
  const description = points
    .map(
      (point) =>
        `${point.label} step ${point.step}: ${point.tokens}${point.folds.length ? " (memory folded before it)" : ""}`,
    )
    .join("; ");
  const chart = svg(
    "svg",
    {
      class: "chart",
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-labelledby": "chart-title chart-desc",
    },
    svg("title", { id: "chart-title" }, "Prompt tokens per step"),
    svg("desc", { id: "chart-desc" }, description),
    grid,
    labels,
    bars,
    svg("text", { class: "axis-label", x: LEFT, y: height - 4 }, "step"),
  );
  const anyFold = points.some((point) => point.folds.length > 0);
  return el(
    "figure",
    { class: "chart-figure" },
    el("div", { class: "chart-scroll" }, chart),
    el(
      "figcaption",
      {},
      "Prompt tokens per step, run after run. Growth is the conversation being sent again each step; a drop is memory folding older turns into a summary.",
      anyFold
        ? [
            " ",
            el(
              "span",
              { class: "fold-legend" },
              el("span", { class: "fold-key", "aria-hidden": "true" }, "▼"),
              " marks a step where memory folded; the step below says what it kept.",
            ),
          ]
        : null,
    ),
  );
}
