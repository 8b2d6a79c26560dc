/** glassbox as a library: the agent loop, the model client, the tool engine and their types. */
export { runAgent, resumeAgent, DEFAULT_MAX_STEPS, DEFAULT_SYSTEM_PROMPT } from "./agent/loop.js";
export type { AgentConfig, Task, RunResult, RunState, PausedRun, StopReason, ToolCallSummary } from "./agent/loop.js";
export type { AgentEvent, AgentEventListener } from "./agent/events.js";
export { createOpenAIModel, type OpenAIModelOptions, type ToolMode } from "./agent/llm.js";
export { GlassboxError, type ErrorCode } from "./agent/errors.js";
export type { ChatModel, Message, ModelRequest, ModelResponse, Usage } from "./agent/types.js";
export { defineTool } from "./tools/define-tool.js";
export { createToolRegistry, ToolDefinitionError, type ToolRegistry, type RegisteredTool } from "./tools/registry.js";
export { executeToolCalls, resumeToolCalls, argumentsHash, type PendingToolCall } from "./tools/executor.js";
export { createBuiltinTools } from "./tools/builtin/index.js";
export type * from "./tools/types.js";
export { loadConfig, type GlassboxConfig } from "./config.js";
