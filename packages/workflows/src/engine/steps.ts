/**
 * Stored workflow steps as the engine runs them: each step's `config` read once, where the graph comes out of the
 * database ({@link engineGraph}, called by the engine's graph cache), into a value typed by its step type (a
 * discriminated union on `type`), and a CONDITION's segment filter parsed there too. The engine then reads configs
 * without casts or parsing per run.
 *
 * Stored configs were validated for their type when written (`parseStepConfig` in `../workflows`, through the API,
 * the graph replace or an import), so they are typed here, not checked again: a config stored before a rule was
 * tightened still runs as it did. A CONDITION whose stored filter no longer parses keeps the error, thrown when an
 * execution reaches the step (as the parse at that step threw before).
 *
 * @module
 */
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import type { SegmentFilter } from '@mailroom/audiences/segments';
import { type WorkflowGraph, type WorkflowStepRow } from '../queries/workflows';
import { type WorkflowStepType } from '@mailroom/db/schema/workflow-states';
import { type StepConfig } from '../workflows';

/** A stored step of type `T` with its configuration typed for `T`. */
export type StepOf<T extends WorkflowStepType> = Omit<WorkflowStepRow, 'type' | 'config'> & {
  type: T;
  config: StepConfig<T>;
} & (T extends 'CONDITION'
    ? {
        /** The step's filter, parsed (context fields allowed), or why it does not parse. */
        filter: { ok: true; value: SegmentFilter } | { ok: false; error: unknown };
      }
    : unknown);

/** A stored step, typed by its `type`: narrowing on `type` gives its config's type. */
export type EngineStep = { [T in WorkflowStepType]: StepOf<T> }[WorkflowStepType];

/** A workflow's graph with its steps typed ({@link EngineStep}). */
export type EngineGraph = Omit<WorkflowGraph, 'steps'> & { steps: EngineStep[] };

/** The one place a stored step's `config` meets its type (see the module notes). */
export function engineStep(row: WorkflowStepRow): EngineStep {
  if (row.type !== 'CONDITION') return row as EngineStep;
  const config = row.config as StepConfig<'CONDITION'>;
  let filter: StepOf<'CONDITION'>['filter'];
  try {
    filter = { ok: true, value: parseSegmentFilter(config.filter, 'filter', { allowContext: true }) };
  } catch (error) {
    filter = { ok: false, error };
  }
  return { ...row, type: 'CONDITION', config, filter };
}

/** {@link engineStep} over every step of a graph loaded from the database. */
export function engineGraph(g: WorkflowGraph): EngineGraph {
  return { ...g, steps: g.steps.map(engineStep) };
}

/** The parsed filter of a CONDITION step. @throws what parsing its stored filter threw (an `AppError` 422). */
export function conditionFilter(step: StepOf<'CONDITION'>): SegmentFilter {
  if (!step.filter.ok) throw step.filter.error;
  return step.filter.value;
}
