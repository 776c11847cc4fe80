// The agentrl dashboard page: plain DOM and uPlot, no build step.
// Every string from a run (model output, observations, errors, task names) enters the page
// as a text node or an attribute value set through the DOM, never as HTML: model output is
// untrusted.
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token");
const withToken = (path) =>
  TOKEN ? `${path}${path.includes("?") ? "&" : "?"}token=${encodeURIComponent(TOKEN)}` : path;
const api = async (path) => {
  const response = await fetch(withToken(path));
  if (!response.ok)
    throw new Error(
      `${path}: ${response.status} ${(await response.json().catch(() => ({}))).error ?? ""}`,
    );
  return response.json();
};

/** el("div", {class: "x", title: "..."}, child, "text", …): text children become text nodes. */
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "style") node.style.cssText = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const clear = (node) => {
  while (node.firstChild) node.firstChild.remove();
  return node;
};
const fmt = (x, digits = 3) =>
  typeof x === "number" && Number.isFinite(x)
    ? Math.abs(x) >= 1000
      ? x.toFixed(0)
      : Number(x.toPrecision(digits)).toString()
    : "—";
const pct = (x) => (typeof x === "number" ? `${(100 * x).toFixed(1)}%` : "—");
const duration = (s) =>
  s === undefined
    ? "—"
    : s < 90
      ? `${Math.round(s)} s`
      : s < 5400
        ? `${Math.round(s / 60)} min`
        : `${(s / 3600).toFixed(1)} h`;
const PALETTE = [
  "#2f6fde",
  "#e8590c",
  "#2b8a3e",
  "#c2255c",
  "#7048e8",
  "#0c8599",
  "#e67700",
  "#5c940d",
  "#862e9c",
  "#1864ab",
];

const state = {
  runs: [],
  run: undefined,
  metrics: new Map(), // run → lines
  charts: [],
  compare: new Set(),
  compareMetric: "success",
  tab: "runs",
  trajectorySteps: [],
  step: undefined,
  stepRecord: undefined,
  episode: undefined,
  colorBy: "version",
  filters: { task: "", status: "", minReward: "", maxReward: "", search: "" },
};

// ── tabs and run picker ──────────────────────────────────────────────────────
for (const button of document.querySelectorAll("#tabs button")) {
  button.addEventListener("click", () => showTab(button.dataset.tab));
}
function showTab(tab) {
  state.tab = tab;
  for (const button of document.querySelectorAll("#tabs button"))
    button.classList.toggle("active", button.dataset.tab === tab);
  for (const section of document.querySelectorAll(".tab"))
    section.classList.toggle("active", section.id === `tab-${tab}`);
  render();
}
const runSelect = document.getElementById("run-select");
runSelect.addEventListener("change", () => selectRun(runSelect.value));

async function selectRun(name) {
  state.run = name;
  runSelect.value = name;
  state.step = undefined;
  state.stepRecord = undefined;
  state.episode = undefined;
  await loadMetrics(name);
  render();
}
async function loadMetrics(name) {
  state.metrics.set(name, await api(`/api/runs/${encodeURIComponent(name)}/metrics`));
}

async function loadRuns() {
  state.runs = await api("/api/runs");
  clear(runSelect).append(...state.runs.map((r) => el("option", { value: r.name }, r.name)));
  if (!state.run && state.runs.length) {
    const running = state.runs.find((r) => r.status === "running");
    await selectRun((running ?? state.runs[0]).name);
  } else if (state.run) runSelect.value = state.run;
}

function render() {
  for (const chart of state.charts) chart.destroy();
  state.charts = [];
  if (state.tab === "runs") renderRuns();
  if (state.tab === "curves") renderCurves();
  if (state.tab === "environments") renderEnvironments();
  if (state.tab === "trajectories") renderTrajectories();
  if (state.tab === "evaluations") renderEvaluations();
}

// ── charts ───────────────────────────────────────────────────────────────────
/** Series of `lines` whose keys match: [{label, key}] → uPlot data over step. */
function chartData(lines, keys) {
  const rows = lines.filter((line) => keys.some((k) => typeof line[k.key] === "number"));
  return [
    rows.map((l) => l.step),
    ...keys.map((k) => rows.map((l) => (typeof l[k.key] === "number" ? l[k.key] : null))),
  ];
}
function lineChart(container, title, keys, data, options = {}) {
  const box = el("div", { class: "panel chart", "data-chart": title }, el("h2", {}, title));
  container.append(box);
  if (data[0].length === 0) {
    box.append(el("div", { class: "empty" }, "no points yet"));
    return undefined;
  }
  const width = Math.max(360, box.clientWidth - 28);
  const chart = new uPlot(
    {
      width,
      height: 200,
      scales: { x: { time: false }, ...(options.percent ? { y: { range: [0, 1] } } : {}) },
      axes: [
        { label: "step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] },
        {
          size: 52,
          values: (u, ticks) =>
            ticks.map((t) => (options.percent ? `${Math.round(t * 100)}%` : fmt(t, 3))),
        },
      ],
      series: [
        { label: "step" },
        ...keys.map((k, i) => ({
          label: k.label,
          stroke: PALETTE[i % PALETTE.length],
          width: 1.6,
          spanGaps: true,
          points: { size: 4 },
        })),
      ],
      legend: { live: true },
    },
    data,
    box,
  );
  chart.agentrl = { keys, title };
  state.charts.push(chart);
  return chart;
}
const taskKeys = (lines, prefix) => {
  const tasks = new Set();
  for (const line of lines)
    for (const key of Object.keys(line))
      if (key.startsWith(prefix) && !key.slice(prefix.length).includes("/"))
        tasks.add(key.slice(prefix.length));
  return [...tasks].sort().map((task) => ({ label: task, key: `${prefix}${task}` }));
};
const present = (lines, keys) =>
  keys.filter((k) => lines.some((l) => typeof l[k.key] === "number"));

/** The charts of the Curves tab: [title, keys, percent?]. */
function curveSpecs(lines) {
  const matching = (pattern) =>
    [...new Set(lines.flatMap((l) => Object.keys(l)))]
      .filter((k) => pattern.test(k))
      .sort()
      .map((key) => ({ label: key, key }));
  return [
    ["Success per task (train batches)", taskKeys(lines, "success/"), true],
    ["Success per task (evaluations)", taskKeys(lines, "eval/success/"), true],
    ["Reward per task (train batches)", taskKeys(lines, "reward/"), false],
    ["Reward per task (evaluations)", taskKeys(lines, "eval/reward/"), false],
    [
      "Loss",
      present(lines, [
        { label: "loss", key: "train/loss" },
        { label: "policy loss", key: "train/policyLoss" },
      ]),
      false,
    ],
    ["KL to the sampler", present(lines, [{ label: "kl", key: "train/kl" }]), false],
    ["Entropy", present(lines, [{ label: "entropy", key: "train/entropy" }]), false],
    [
      "Clip fraction",
      present(lines, [{ label: "clip fraction", key: "train/clipFraction" }]),
      false,
    ],
    ["Staleness (versions)", present(lines, [{ label: "staleness", key: "staleness" }]), false],
    [
      "Stale / external turns",
      [
        ...present(lines, [
          { label: "stale turns", key: "rollout/stale_turns" },
          { label: "external turns", key: "rollout/external_turns" },
        ]),
        ...matching(/^rollout\/.*share/),
      ],
      false,
    ],
    [
      "Tokens per second",
      present(lines, [
        { label: "train", key: "throughput/train_tokens_per_second" },
        { label: "rollout", key: "throughput/rollout_tokens_per_second" },
      ]),
      false,
    ],
    [
      "Time split per step (s)",
      present(lines, [
        { label: "waiting", key: "time/wait" },
        { label: "training", key: "time/train" },
        { label: "sync", key: "time/sync" },
        { label: "rollout decode", key: "time/rollout_decode" },
        { label: "rollout prefill", key: "time/rollout_prefill" },
      ]),
      false,
    ],
  ];
}

function renderCurves() {
  const root = clear(document.getElementById("tab-curves"));
  const lines = state.metrics.get(state.run) ?? [];
  if (!state.run) return root.append(el("div", { class: "empty" }, "no run"));
  const last = lines.at(-1);
  root.append(
    el(
      "div",
      { class: "panel kv" },
      el("span", {}, "run ", el("b", {}, state.run)),
      el("span", {}, "steps ", el("b", { id: "curves-steps" }, String(lines.length))),
      el("span", {}, "last step ", el("b", { id: "curves-last" }, last ? String(last.step) : "—")),
      el("span", {}, "reward ", el("b", {}, fmt(last?.reward))),
      el("span", {}, "success ", el("b", {}, pct(last?.success))),
    ),
  );
  const grid = el("div", { class: "grid" });
  root.append(grid);
  for (const [title, keys, percent] of curveSpecs(lines)) {
    if (keys.length === 0) continue;
    lineChart(grid, title, keys, chartData(lines, keys), { percent });
  }
}

/** New metric lines of the selected run: update its charts in place. */
function onMetrics(run, lines) {
  const all = state.metrics.get(run) ?? [];
  const known = new Set(all.map((l) => l.step));
  for (const line of lines) if (!known.has(line.step)) all.push(line);
  all.sort((a, b) => a.step - b.step);
  state.metrics.set(run, all);
  if (state.tab === "curves" && run === state.run) {
    const specs = curveSpecs(all);
    const shown = state.charts.map((c) => c.agentrl.title).join("|");
    const wanted = specs
      .filter(([, keys]) => keys.length)
      .map(([title]) => title)
      .join("|");
    const sameSeries = state.charts.every(
      (c) => specs.find(([t]) => t === c.agentrl.title)?.[1].length === c.agentrl.keys.length,
    );
    if (shown === wanted && sameSeries) {
      for (const chart of state.charts) chart.setData(chartData(all, chart.agentrl.keys));
      const counter = document.getElementById("curves-steps");
      if (counter) counter.textContent = String(all.length);
      const lastStep = document.getElementById("curves-last");
      if (lastStep) lastStep.textContent = String(all.at(-1).step);
    } else render();
  }
  if (state.tab === "runs" && state.compare.has(run)) render();
}

// ── runs ─────────────────────────────────────────────────────────────────────
function renderRuns() {
  const root = clear(document.getElementById("tab-runs"));
  const table = el(
    "table",
    { id: "runs-table" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", {}, "compare"),
        el("th", {}, "run"),
        el("th", {}, "status"),
        el("th", { class: "num" }, "step"),
        el("th", { class: "num" }, "ETA"),
        el("th", {}, "tasks"),
        el("th", {}, "last update"),
      ),
    ),
    el(
      "tbody",
      {},
      state.runs.map((run) =>
        el(
          "tr",
          {
            class: `clickable${run.name === state.run ? " selected" : ""}`,
            "data-run": run.name,
            onclick: (event) => {
              if (event.target.tagName !== "INPUT")
                selectRun(run.name).then(() => showTab("curves"));
            },
          },
          el(
            "td",
            {},
            el("input", {
              type: "checkbox",
              checked: state.compare.has(run.name),
              onchange: async (event) => {
                if (event.target.checked) {
                  state.compare.add(run.name);
                  if (!state.metrics.has(run.name)) await loadMetrics(run.name);
                } else state.compare.delete(run.name);
                render();
              },
            }),
          ),
          el("td", {}, el("b", {}, run.name)),
          el("td", {}, el("span", { class: `badge ${run.status}` }, run.status)),
          el("td", { class: "num" }, `${run.step}${run.totalSteps ? ` / ${run.totalSteps}` : ""}`),
          el("td", { class: "num" }, run.status === "running" ? duration(run.etaSeconds) : "—"),
          el("td", {}, run.tasks.join(", ")),
          el(
            "td",
            { class: "muted" },
            run.lastUpdate ? new Date(run.lastUpdate).toLocaleString() : "—",
          ),
        ),
      ),
    ),
  );
  root.append(
    el(
      "div",
      { class: "panel" },
      el("h2", {}, `Runs in this folder (${state.runs.length})`),
      state.runs.length
        ? table
        : el(
            "div",
            { class: "empty" },
            "no run folders (metrics.jsonl, config.yaml or trajectories.jsonl) found",
          ),
    ),
  );
  // Compare chart: one metric, one series per checked run.
  if (state.compare.size) {
    const metricNames = [
      ...new Set(
        [...state.compare].flatMap((r) =>
          (state.metrics.get(r) ?? []).flatMap((l) => Object.keys(l)),
        ),
      ),
    ]
      .filter((k) => !["step", "time", "version"].includes(k))
      .sort();
    const select = el(
      "select",
      {
        id: "compare-metric",
        onchange: (event) => {
          state.compareMetric = event.target.value;
          render();
        },
      },
      metricNames.map((k) => el("option", { value: k, selected: k === state.compareMetric }, k)),
    );
    const panel = el(
      "div",
      { class: "panel" },
      el("div", { class: "controls" }, el("b", {}, "Compare runs on "), select),
    );
    root.append(panel);
    const runs = [...state.compare];
    const steps = [
      ...new Set(runs.flatMap((r) => (state.metrics.get(r) ?? []).map((l) => l.step))),
    ].sort((a, b) => a - b);
    const data = [
      steps,
      ...runs.map((r) => {
        const by = new Map(
          (state.metrics.get(r) ?? []).map((l) => [l.step, l[state.compareMetric]]),
        );
        return steps.map((s) => (typeof by.get(s) === "number" ? by.get(s) : null));
      }),
    ];
    lineChart(
      panel,
      `${state.compareMetric} by run`,
      runs.map((r) => ({ label: r, key: state.compareMetric })),
      data,
    );
  }
  if (state.run) {
    const box = el(
      "div",
      { class: "panel" },
      el("h2", {}, `Config of ${state.run}`),
      el("pre", { id: "run-config" }, "loading…"),
    );
    root.append(box);
    api(`/api/runs/${encodeURIComponent(state.run)}/config`)
      .then((config) => {
        box.querySelector("pre").textContent = config ? config.text : "no config.yaml in this run";
      })
      .catch((e) => {
        box.querySelector("pre").textContent = e.message;
      });
  }
}

// ── environments ─────────────────────────────────────────────────────────────
let environmentTimer;
async function renderEnvironments() {
  clearTimeout(environmentTimer);
  const root = document.getElementById("tab-environments");
  let snapshot;
  try {
    snapshot = await api("/api/environments");
  } catch (error) {
    clear(root).append(el("div", { class: "panel" }, error.message));
    return;
  }
  if (state.tab !== "environments") return;
  clear(root);
  if (!snapshot.url) {
    root.append(
      el(
        "div",
        { class: "panel empty" },
        "no controller: start the dashboard with --controller URL (the environment controller, e.g. http://127.0.0.1:5020)",
      ),
    );
    return;
  }
  const workers = Object.entries(snapshot.workers).flatMap(([task, entry]) =>
    Object.values(entry.workers).map((w) => ({ task, indexCount: entry.index_count, ...w })),
  );
  root.append(
    el(
      "div",
      { class: "panel" },
      el("h2", {}, `Workers of ${snapshot.url}`),
      workers.length
        ? el(
            "table",
            { id: "workers-table" },
            el(
              "thead",
              {},
              el(
                "tr",
                {},
                [
                  "task",
                  "worker",
                  "address",
                  "status",
                  "sessions",
                  "capacity",
                  "samples",
                  "last heartbeat",
                ].map((h) => el("th", {}, h)),
              ),
            ),
            el(
              "tbody",
              {},
              workers.map((w) =>
                el(
                  "tr",
                  {},
                  el("td", {}, el("b", {}, w.task)),
                  el("td", { class: "num" }, String(w.id)),
                  el("td", {}, w.address),
                  el(
                    "td",
                    {},
                    el(
                      "span",
                      { class: `badge ${w.status === "alive" ? "completed" : "bad"}` },
                      w.status,
                    ),
                  ),
                  el("td", { class: "num" }, String(w.current)),
                  el("td", { class: "num" }, String(w.capacity)),
                  el("td", { class: "num" }, String(w.indexCount)),
                  el(
                    "td",
                    { class: "muted" },
                    w.local ? "in-process" : new Date(w.last_visit * 1000).toLocaleTimeString(),
                  ),
                ),
              ),
            ),
          )
        : el("div", { class: "empty" }, "no workers registered"),
    ),
  );
  const sessionTable = (rows, finished) =>
    el(
      "table",
      {},
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ["session", "task", "index", "worker", "started", finished ? "ended" : "last update"].map(
            (h) => el("th", {}, h),
          ),
        ),
      ),
      el(
        "tbody",
        {},
        rows
          .slice(0, 100)
          .map((s) =>
            el(
              "tr",
              {},
              el("td", {}, s.id),
              el("td", {}, s.name),
              el("td", { class: "num" }, String(s.index)),
              el("td", { class: "num" }, String(s.worker_id)),
              el("td", { class: "muted" }, new Date(s.start * 1000).toLocaleTimeString()),
              el(
                "td",
                { class: "muted" },
                new Date((finished ? s.ended : s.last_update) * 1000).toLocaleTimeString(),
              ),
            ),
          ),
      ),
    );
  root.append(
    el(
      "div",
      { class: "panel" },
      el("h2", {}, `Live sessions (${snapshot.sessions.length})`),
      snapshot.sessions.length
        ? sessionTable(snapshot.sessions, false)
        : el("div", { class: "empty" }, "none"),
    ),
  );
  root.append(
    el(
      "div",
      { class: "panel" },
      el("h2", {}, `Finished sessions seen by this page's server (${snapshot.finished.length})`),
      snapshot.finished.length
        ? sessionTable(snapshot.finished, true)
        : el("div", { class: "empty" }, "none yet"),
    ),
  );
  root.append(
    el(
      "div",
      { class: "panel" },
      el("h2", {}, `Errors (${snapshot.errors.length})`),
      snapshot.errors.length
        ? el(
            "table",
            {},
            el(
              "tbody",
              {},
              snapshot.errors.map((e) =>
                el("tr", {}, el("td", { class: "muted" }, e.time), el("td", {}, e.message)),
              ),
            ),
          )
        : el("div", { class: "empty" }, "none"),
    ),
  );
  environmentTimer = setTimeout(() => {
    if (state.tab === "environments") renderEnvironments();
  }, 2000);
}

// ── trajectories ─────────────────────────────────────────────────────────────
async function renderTrajectories() {
  const root = clear(document.getElementById("tab-trajectories"));
  if (!state.run) return;
  state.trajectorySteps = await api(`/api/runs/${encodeURIComponent(state.run)}/trajectories`);
  if (state.tab !== "trajectories") return;
  clear(root);
  if (state.trajectorySteps.length === 0) {
    root.append(
      el(
        "div",
        { class: "panel empty" },
        "no recorded trajectories in this run (train with logging.trajectories > 0)",
      ),
    );
    return;
  }
  if (state.step === undefined || !state.trajectorySteps.some((s) => s.step === state.step))
    state.step = state.trajectorySteps.at(-1).step;
  if (!state.stepRecord || state.stepRecord.step !== state.step)
    state.stepRecord = await api(
      `/api/runs/${encodeURIComponent(state.run)}/trajectories/${state.step}`,
    );
  const record = state.stepRecord;
  const f = state.filters;
  const tasks = [...new Set(record.episodes.map((e) => e.task))].sort();
  const statuses = [...new Set(record.episodes.map((e) => e.status))].sort();
  const rerender = () => renderTrajectories();
  const input = (key, attributes) =>
    el("input", {
      ...attributes,
      value: f[key],
      onchange: (event) => {
        f[key] = event.target.value;
        rerender();
      },
    });
  root.append(
    el(
      "div",
      { class: "panel controls" },
      el(
        "label",
        {},
        "step ",
        el(
          "select",
          {
            id: "step-select",
            onchange: (event) => {
              state.step = Number(event.target.value);
              state.episode = undefined;
              rerender();
            },
          },
          state.trajectorySteps.map((s) =>
            el(
              "option",
              { value: s.step, selected: s.step === state.step },
              `${s.step} (${s.recorded} of ${s.batchEpisodes} episodes)`,
            ),
          ),
        ),
      ),
      el(
        "label",
        {},
        "task ",
        el(
          "select",
          {
            onchange: (event) => {
              f.task = event.target.value;
              rerender();
            },
          },
          el("option", { value: "" }, "all"),
          tasks.map((t) => el("option", { value: t, selected: t === f.task }, t)),
        ),
      ),
      el(
        "label",
        {},
        "status ",
        el(
          "select",
          {
            onchange: (event) => {
              f.status = event.target.value;
              rerender();
            },
          },
          el("option", { value: "" }, "all"),
          statuses.map((s) => el("option", { value: s, selected: s === f.status }, s)),
        ),
      ),
      el(
        "label",
        {},
        "reward ≥ ",
        input("minReward", { type: "number", step: "any", size: 5, style: "width:70px" }),
      ),
      el(
        "label",
        {},
        "≤ ",
        input("maxReward", { type: "number", step: "any", style: "width:70px" }),
      ),
      el(
        "label",
        {},
        "search ",
        input("search", {
          type: "search",
          id: "trajectory-search",
          placeholder: "text in prompt, turns, observations",
        }),
      ),
      el(
        "label",
        {},
        "colour tokens by ",
        el(
          "select",
          {
            id: "color-by",
            onchange: (event) => {
              state.colorBy = event.target.value;
              rerender();
            },
          },
          el(
            "option",
            { value: "version", selected: state.colorBy === "version" },
            "policy version",
          ),
          el("option", { value: "logprob", selected: state.colorBy === "logprob" }, "log-prob"),
        ),
      ),
    ),
  );
  const matches = (e) => {
    if (f.task && e.task !== f.task) return false;
    if (f.status && e.status !== f.status) return false;
    if (f.minReward !== "" && e.reward < Number(f.minReward)) return false;
    if (f.maxReward !== "" && e.reward > Number(f.maxReward)) return false;
    if (f.search) {
      const needle = f.search.toLowerCase();
      const haystack = [
        e.prompt,
        e.error ?? "",
        ...e.turns.flatMap((t) => [
          t.tokens.map((x) => x[0]).join(""),
          t.observation,
          JSON.stringify(t.toolCalls),
        ]),
      ]
        .join("\n")
        .toLowerCase();
      if (!haystack.includes(needle)) return false;
    }
    return true;
  };
  const shown = record.episodes.map((e, i) => ({ e, i })).filter(({ e }) => matches(e));
  const groups = new Map();
  for (const item of shown)
    groups.set(item.e.groupId, [...(groups.get(item.e.groupId) ?? []), item]);
  const list = el(
    "table",
    { id: "episode-list" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        ["#", "status", "reward", "adv.", "task adv."].map((h, i) =>
          el("th", { class: i >= 2 ? "num" : "" }, h),
        ),
      ),
    ),
    el(
      "tbody",
      {},
      [...groups].flatMap(([groupId, items]) => [
        el(
          "tr",
          { class: "group-head" },
          el("td", { colspan: 5 }, `group ${groupId} · ${items[0].e.task} #${items[0].e.index}`),
        ),
        ...items.map(({ e, i }) =>
          el(
            "tr",
            {
              class: `clickable episode-row${state.episode === i ? " selected" : ""}`,
              "data-episode": i,
              onclick: () => {
                state.episode = i;
                rerender();
              },
            },
            el("td", {}, `${e.member}`),
            el(
              "td",
              {},
              el(
                "span",
                { class: `badge ${e.status === "completed" ? "completed" : "bad"}` },
                e.status,
              ),
            ),
            el("td", { class: "num" }, fmt(e.reward)),
            el("td", { class: `num ${e.advantage >= 0 ? "pos" : "neg"}` }, fmt(e.advantage)),
            el(
              "td",
              { class: `num ${e.taskAdvantage >= 0 ? "pos" : "neg"}` },
              fmt(e.taskAdvantage),
            ),
          ),
        ),
      ]),
    ),
  );
  const left = el(
    "div",
    { class: "panel episodes" },
    el(
      "h2",
      {},
      `Step ${record.step}: ${shown.length} of ${record.episodes.length} recorded episodes (batch: ${record.batchGroups} groups, ${record.batchEpisodes} episodes)`,
    ),
    shown.length ? list : el("div", { class: "empty" }, "no episode matches"),
  );
  const right = el("div", { class: "panel", id: "episode-detail" });
  const episode = state.episode !== undefined ? record.episodes[state.episode] : undefined;
  if (episode) renderEpisode(right, episode);
  else right.append(el("div", { class: "empty" }, "pick an episode"));
  root.append(el("div", { class: "split" }, left, right));
}

/** Background colour of a generated token. */
function tokenColour(version, logprob, versions) {
  if (state.colorBy === "logprob") {
    // p = e^logprob: red (unlikely) → green (likely)
    const p = Math.exp(Math.max(-20, logprob));
    return `hsla(${Math.round(120 * p)}, 75%, 50%, 0.28)`;
  }
  if (version < 0) return "rgba(127,140,141,0.25)";
  const rank = versions.indexOf(version);
  return `${PALETTE[rank % PALETTE.length]}40`;
}

function renderEpisode(root, e) {
  const versions = [...new Set(e.turns.flatMap((t) => t.tokens.map((x) => x[1])))].sort(
    (a, b) => a - b,
  );
  root.append(el("h2", {}, `${e.task} #${e.index} · group ${e.groupId} · member ${e.member}`));
  root.append(
    el(
      "div",
      { class: "kv" },
      el(
        "span",
        {},
        "status ",
        el("span", { class: `badge ${e.status === "completed" ? "completed" : "bad"}` }, e.status),
      ),
      el("span", {}, "reward ", el("b", {}, fmt(e.reward))),
      el("span", {}, "group advantage ", el("b", {}, fmt(e.advantage))),
      el("span", {}, "task-normalised ", el("b", {}, fmt(e.taskAdvantage))),
      el(
        "span",
        {},
        "versions ",
        el(
          "b",
          {},
          e.minVersion === e.maxVersion ? String(e.minVersion) : `${e.minVersion}–${e.maxVersion}`,
        ),
      ),
      el("span", {}, "turns ", el("b", {}, String(e.turns.length))),
    ),
  );
  if (e.error) root.append(el("pre", { class: "neg" }, e.error));
  const legend =
    state.colorBy === "version"
      ? versions.map((v) =>
          el(
            "span",
            {},
            el("span", { class: "swatch", style: `background:${tokenColour(v, 0, versions)}` }),
            v < 0 ? "external" : `v${v}`,
          ),
        )
      : [
          el(
            "span",
            {},
            el("span", {
              class: "swatch",
              style: `background:${tokenColour(0, Math.log(0.05), versions)}`,
            }),
            "p ≈ 0.05",
          ),
          el(
            "span",
            {},
            el("span", {
              class: "swatch",
              style: `background:${tokenColour(0, Math.log(0.5), versions)}`,
            }),
            "p ≈ 0.5",
          ),
          el(
            "span",
            {},
            el("span", { class: "swatch", style: `background:${tokenColour(0, 0, versions)}` }),
            "p ≈ 1",
          ),
        ];
  root.append(
    el(
      "h3",
      {},
      "tokens coloured by ",
      state.colorBy === "version" ? "policy version" : "sampler log-prob",
    ),
    el("div", { class: "legend" }, legend),
  );
  root.append(
    el(
      "details",
      {},
      el("summary", {}, "prompt (system and user messages)"),
      el("pre", {}, e.prompt),
    ),
  );
  e.turns.forEach((turn, i) => {
    const tokens = el(
      "div",
      { class: "tokens" },
      turn.tokens.map(([text, version, logprob]) =>
        el(
          "span",
          {
            class: "tok",
            "data-version": version,
            title: `version ${version} · log-prob ${logprob}`,
            style: `background:${tokenColour(version, logprob, versions)}`,
          },
          text,
        ),
      ),
    );
    root.append(
      el(
        "div",
        { class: `turn ${turn.policy}` },
        el(
          "div",
          { class: "turn-head" },
          `turn ${i + 1} · ${turn.policy} policy · v${turn.minVersion}${turn.maxVersion !== turn.minVersion ? `–${turn.maxVersion}` : ""} · ${turn.finishReason} · ${turn.tokens.length} tokens`,
          turn.formatError ? ` · format error: ${turn.formatError}` : "",
        ),
        tokens,
        turn.toolCalls.map((call) =>
          el(
            "div",
            { class: "toolcall" },
            "tool call ",
            el("b", {}, call.name),
            el(
              "pre",
              {},
              typeof call.arguments === "string"
                ? call.arguments
                : JSON.stringify(call.arguments, null, 2),
            ),
          ),
        ),
        turn.observation
          ? el(
              "div",
              {},
              el("div", { class: "turn-head" }, "observation"),
              el("pre", { class: "observation" }, turn.observation),
            )
          : null,
      ),
    );
  });
}

// ── evaluations ──────────────────────────────────────────────────────────────
async function renderEvaluations() {
  const root = clear(document.getElementById("tab-evaluations"));
  if (!state.run) return;
  const { results, cached } = await api(`/api/runs/${encodeURIComponent(state.run)}/evaluations`);
  if (state.tab !== "evaluations") return;
  clear(root);
  const table = (title, columns) => {
    const present = columns.filter(([, r]) => r);
    if (!present.length) return null;
    const tasks = [...new Set(present.flatMap(([, r]) => Object.keys(r)))].sort();
    return el(
      "div",
      { class: "panel" },
      el("h2", {}, title),
      el(
        "table",
        { class: "evaluation-table" },
        el(
          "thead",
          {},
          el(
            "tr",
            {},
            el("th", {}, "task"),
            present.map(([name]) => el("th", { class: "num" }, name)),
          ),
        ),
        el(
          "tbody",
          {},
          tasks.map((task) =>
            el(
              "tr",
              {},
              el("td", {}, el("b", {}, task)),
              present.map(([, r]) => {
                const cell = r[task];
                return el(
                  "td",
                  {
                    class: "num",
                    title: cell
                      ? `${cell.episodes} episodes · pass@k ${pct(cell.passAtK)} · mean reward ${fmt(cell.meanReward)} · mean turns ${fmt(cell.meanTurns)}`
                      : "",
                  },
                  cell ? pct(cell.success) : "—",
                );
              }),
            ),
          ),
        ),
      ),
    );
  };
  if (results) {
    root.append(
      table("Test success per task (greedy)", [
        ["before warm start", results.before],
        ["after warm start", results.warmStart],
        [`after RL (step ${results.steps})`, results.final],
      ]),
    );
    if (results.sampled)
      root.append(
        table(`Test success per task (sampled, temperature ${results.sampled.temperature})`, [
          ["after warm start", results.sampled.warmStart],
          [`after RL (step ${results.steps})`, results.sampled.final],
        ]),
      );
  } else
    root.append(
      el(
        "div",
        { class: "panel empty" },
        "no results.json yet (written at the end of `agentrl train`)",
      ),
    );
  const names = Object.keys(cached);
  if (names.length)
    root.append(
      table(
        "Cached evaluations (evaluations/*.json)",
        names.map((n) => [n, cached[n]]),
      ),
    );
  root.append(
    el(
      "div",
      { class: "panel muted" },
      "Hover a cell for pass@k, mean reward and turns. The episodes behind a cell are not recorded by `agentrl train`; `agentrl eval --transcripts` writes them.",
    ),
  );
}

// ── live updates ─────────────────────────────────────────────────────────────
function connect() {
  const events = new EventSource(withToken("/api/events"));
  const live = document.getElementById("live");
  events.onopen = () => live.classList.add("on");
  events.onerror = () => live.classList.remove("on");
  events.addEventListener("metrics", (event) => {
    const { run, lines } = JSON.parse(event.data);
    onMetrics(run, lines);
  });
  events.addEventListener("runs", (event) => {
    state.runs = JSON.parse(event.data);
    const names = state.runs.map((r) => r.name).join("|");
    if ([...runSelect.options].map((o) => o.value).join("|") !== names)
      clear(runSelect).append(...state.runs.map((r) => el("option", { value: r.name }, r.name)));
    if (state.run) runSelect.value = state.run;
    if (state.tab === "runs") render();
  });
  events.addEventListener("trajectories", (event) => {
    const { run, steps } = JSON.parse(event.data);
    if (run !== state.run || state.tab !== "trajectories") return;
    const select = document.getElementById("step-select");
    // Add the new steps to the picker without disturbing what is open.
    for (const step of steps)
      if (select && ![...select.options].some((o) => Number(o.value) === step))
        select.append(el("option", { value: step }, `${step} (new)`));
  });
}

connect();
loadRuns()
  .then(render)
  .catch((error) =>
    document.querySelector("main").prepend(el("div", { class: "panel neg" }, error.message)),
  );
