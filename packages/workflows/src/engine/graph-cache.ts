/**
 * The cache of workflow graphs the engine runs executions with, one per worker process, kept with their steps typed
 * (`./steps`: each config read once per load, not per run).
 *
 * @module
 */
import { type EngineGraph } from './steps';

/** Graphs kept in memory per worker process (workflows). */
const GRAPH_CACHE_SIZE = 500;

/**
 * Workflow graphs by workflow, valid while the workflow's `updated_at` (read with each claim) is unchanged: every
 * graph edit moves it in the edit's transaction. A graph loaded after the claim may be newer than the claim's
 * version: kept under that version, it is served to claims of that version only, and a newer claim reloads.
 * At most 500 graphs are kept (the oldest entry goes first).
 */
export class GraphCache {
  private readonly graphs = new Map<string, { version: string; graph: EngineGraph }>();

  constructor(private readonly load: (projectId: string, workflowId: string) => Promise<EngineGraph | undefined>) {}

  /** The graph of `workflowId` as of `version` (the claim's `updated_at`), or undefined when the workflow is gone. */
  async get(projectId: string, workflowId: string, version: string): Promise<EngineGraph | undefined> {
    const hit = this.graphs.get(workflowId);
    if (hit && hit.version === version) return hit.graph;
    const graph = await this.load(projectId, workflowId);
    if (!graph) return undefined;
    if (this.graphs.size >= GRAPH_CACHE_SIZE) this.graphs.delete(this.graphs.keys().next().value!);
    this.graphs.set(workflowId, { version, graph });
    return graph;
  }
}
