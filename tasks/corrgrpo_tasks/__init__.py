"""The paper's task domains: code generation, tool calling, agent security."""
