/**
 * Generative-UI cards for chat clients (agent-chat-ui): one component per UI message `name` the
 * graphs stream (docs/events.md, "Generative-UI messages"). Built by the LangGraph server's UI
 * bundler from the `ui` entry of langgraph.json; every graph id maps to this file.
 */
import React from "react";

type Props = Record<string, any>;

const box: React.CSSProperties = {
  border: "1px solid #e4e4e7",
  borderRadius: 8,
  padding: "8px 12px",
  margin: "6px 0",
  fontSize: 13,
  fontFamily: "system-ui, sans-serif",
  background: "#fafafa",
};
const muted: React.CSSProperties = { color: "#71717a" };
const STATUS_ICON: Record<string, string> = {
  planned: "○",
  pending: "○",
  running: "◐",
  retrying: "↻",
  completed: "✓",
  recovered: "✓",
  done: "✓",
  success: "✓",
  approve: "✓",
  edit: "✎",
  failed: "✗",
  error: "✗",
  reject: "✗",
  skipped: "–",
  dropped: "–",
};
const icon = (status?: string) => STATUS_ICON[status ?? ""] ?? "•";
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
const code: React.CSSProperties = { fontFamily: "ui-monospace, monospace", fontSize: 12 };

// The call a step makes, as it runs: an edited plan's arguments show here, not only the description.
function ToolCall({ tool, args }: { tool?: string; args?: Props }) {
  if (!tool) return null;
  return (
    <span style={muted}>
      {" "}
      · <span style={code} data-ui-call>{`${tool} ${JSON.stringify(args ?? {})}`}</span>
    </span>
  );
}

function RouteDecision(props: Props) {
  return (
    <div style={box} data-ui="route_decision">
      <b>Route:</b> {props.route}
      {props.kb_prefix && props.kb_prefix !== "general" ? ` (knowledge base ${props.kb_prefix})` : ""}
      <span style={muted}> · {props.method}, confidence {Number(props.confidence ?? 0).toFixed(2)}</span>
      {props.reason ? <div style={muted}>{props.reason}</div> : null}
    </div>
  );
}

function RetrievalProgress(props: Props) {
  const label =
    props.stage === "retrieval"
      ? `Searching: ${props.completed}/${props.total} searches done`
      : props.stage === "generation"
        ? `Answering from ${props.retrieval_count ?? 0} passages${props.completed ? " (done)" : "…"}`
        : "Routing…";
  return (
    <div style={box} data-ui="retrieval_progress">
      {label}
      {props.error ? <div style={{ color: "#b91c1c" }}>{props.error}</div> : null}
    </div>
  );
}

function Citations(props: Props) {
  const sources: Props[] = props.sources ?? [];
  return (
    <div style={box} data-ui="citations">
      <b>Sources</b>
      <span style={muted}>
        {" "}
        · {props.cited} cited{props.removed ? `, ${props.removed} unverified removed` : ""}
      </span>
      {sources.length ? (
        <ol style={{ margin: "4px 0 0 18px", padding: 0 }}>
          {sources.map((s) => (
            <li key={s.index} value={s.index}>
              {s.title || s.source}
              <span style={muted}>
                {" "}
                — {s.source}
                {s.section ? ` § ${s.section}` : s.locator ? ` (${s.locator})` : ""}
              </span>
            </li>
          ))}
        </ol>
      ) : null}
    </div>
  );
}

function Plan(props: Props) {
  const steps: Props[] = props.steps ?? [];
  return (
    <div style={box} data-ui="plan">
      <b>Plan</b> <span style={muted}>({props.status})</span>
      <ol style={{ margin: "4px 0 0 18px", padding: 0 }}>
        {steps.map((s) => (
          <li key={s.id}>
            {s.description}
            <ToolCall tool={s.tool} args={s.args} />
          </li>
        ))}
      </ol>
    </div>
  );
}

function PlanStep(props: Props) {
  return (
    <div style={box} data-ui="plan_step" data-status={props.status}>
      {icon(props.status)} <b>{props.step_id}</b> {props.description ?? ""}
      <ToolCall tool={props.tool} args={props.args} />
      <span style={muted}> · {props.status}</span>
      {props.result_preview ? <div style={muted}>{String(props.result_preview).slice(0, 200)}</div> : null}
      {props.error || props.reason ? <div style={{ color: "#b91c1c" }}>{props.error || props.reason}</div> : null}
    </div>
  );
}

function ToolProgress(props: Props) {
  return (
    <div style={box} data-ui="tool_progress" data-status={props.status}>
      {icon(props.status)} <b>{props.name}</b>
      <span style={muted}> {props.args ? JSON.stringify(props.args) : ""}</span>
      {props.duration_ms != null ? <span style={muted}> · {Math.round(props.duration_ms)} ms</span> : null}
      {props.error ? <div style={{ color: "#b91c1c" }}>{props.error}</div> : null}
    </div>
  );
}

function ResearchProgress(props: Props) {
  const questions: string[] = props.sub_questions ?? [];
  return (
    <div style={box} data-ui="research_progress">
      <b>Research</b>
      <span style={muted}>
        {" "}
        · {props.stage}
        {props.round ? `, round ${props.round}` : ""}
        {props.sources_total != null ? `, report from ${plural(props.sources_total, "source")}` : ""}
      </span>
      {questions.length ? (
        <ul style={{ margin: "4px 0 0 18px", padding: 0 }}>
          {questions.map((q) => (
            <li key={q}>{q}</li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

function Researcher(props: Props) {
  return (
    <div style={box} data-ui="researcher" data-status={props.status}>
      {icon(props.status)} <b>{props.researcher_id}</b> {props.question}
      {props.sources_found != null ? (
        <span style={muted}>
          {" "}
          · {plural(props.sources_found, "source")} found, {props.sources_read ?? 0} read
        </span>
      ) : (
        <span style={muted}> · searching…</span>
      )}
    </div>
  );
}

export default {
  route_decision: RouteDecision,
  retrieval_progress: RetrievalProgress,
  citations: Citations,
  plan: Plan,
  plan_step: PlanStep,
  tool_progress: ToolProgress,
  research_progress: ResearchProgress,
  researcher: Researcher,
};
