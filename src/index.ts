/** glassbox as a library: the agent loop, the model client, the tool engine, memory, traces and conversations. */
export { runAgent, DEFAULT_MAX_STEPS, DEFAULT_SYSTEM_PROMPT } from "./agent/loop.js";
// The loop's resumeAgent, checking that each decision is for a call the paused run waits for.
export { resumeAgent, pendingApprovals } from "./agent/library-resume.js";
export type { AgentConfig, Task, RunResult, RunState, PausedRun, StopReason, ToolCallSummary } from "./agent/loop.js";
export type { AgentEvent, AgentEventListener } from "./agent/events.js";
export { createOpenAIModel, type OpenAIModelOptions, type ToolMode } from "./agent/llm/index.js";
export { GlassboxError, type ErrorCode } from "./agent/errors.js";
export type { ChatModel, Message, ModelRequest, ModelResponse, Usage } from "./agent/types.js";
export { defineTool } from "./tools/define-tool.js";
export { createToolRegistry, ToolDefinitionError, type ToolRegistry, type RegisteredTool } from "./tools/registry.js";
export { executeToolCalls, resumeToolCalls, argumentsHash, type PendingToolCall } from "./tools/executor.js";
export { createBuiltinTools } from "./tools/builtin/index.js";
export type * from "./tools/types.js";
export { ToolPause } from "./tools/types.js";
export { loadConfig, type GlassboxConfig } from "./config.js";
// Memory, traces and conversations: the parts the chat adapters are built from. Everything persists
// through a store port (openStorePort).
export { createMemory, type Memory, type MemoryStore } from "./agent/memory.js";
export { openStorePort, type AnyStorePort, type StorePort } from "./store/index.js";
export { createTokenCounter, encodingForModel } from "./agent/tokens.js";
export { createTraceRecorder } from "./agent/trace.js";
export { createConversations, type ChatSurface, type Conversations } from "./conversations/conversations.js";
export { createSpecialistTools, createPipelines, parseAgentsConfig, type AgentDefinition } from "./agent/sub-agents.js";
export { createToolSelector } from "./tools/selection.js";
export { connectMcpServers } from "./tools/mcp.js";
export { createAgentConfig, type GlassboxAgent } from "./setup.js";
