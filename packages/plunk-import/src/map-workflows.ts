/**
 * Plunk v2 workflows, their steps and transitions → ours (see `map.ts`: workflows arrive disabled).
 *
 * @module
 */
import { plunkRowId } from './ids';
import { mapStepConfig } from './steps';
import { type Row, fail, str, parent, type MapContext } from './map-context';

/** A Plunk workflow, always imported disabled (enable it here once Plunk no longer runs it). */
export function mapWorkflow(r: Row, ctx: MapContext) {
  const projectId = parent(ctx, 'project', r.projectId);
  if (!projectId) return fail(`its project ${r.projectId} was not imported`);
  let triggerEvent: string | null = null;
  if (r.triggerType === 'EVENT') {
    triggerEvent = str(r.triggerConfig?.eventName);
    if (!triggerEvent) return fail('EVENT trigger without triggerConfig.eventName');
  } else if (r.triggerType !== 'MANUAL') {
    return fail(`${r.triggerType} triggers have no equivalent here (EVENT and MANUAL only)`);
  }
  return {
    ok: true as const,
    row: {
      id: plunkRowId('workflow', r.id, r.createdAt),
      projectId,
      name: str(r.name) ?? 'Untitled',
      description: str(r.description),
      triggerType: r.triggerType as 'EVENT' | 'MANUAL',
      triggerEvent,
      allowReentry: r.allowReentry === true,
      enabled: false,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
    ...(r.enabled
      ? {
          note: `workflow ${r.id} was enabled in Plunk: imported disabled (enable it here once Plunk no longer runs it)`,
        }
      : {}),
  };
}

/** A Plunk workflow step (a TRIGGER step is no row here: `null`, and remembered in the context). */
export function mapStep(r: Row, ctx: MapContext, projectOf: (workflowId: string) => string | undefined) {
  const workflowId = parent(ctx, 'workflow', r.workflowId);
  const projectId = workflowId ? projectOf(workflowId) : undefined;
  if (!workflowId || !projectId) return fail(`its workflow ${r.workflowId} was not imported`);
  if (r.type === 'TRIGGER') {
    ctx.triggerSteps.add(r.id);
    return { ok: true as const, row: null };
  }
  const config = mapStepConfig(r.type, r.config, r.templateId, (id) => ctx.template.get(id));
  if (!config.ok) return config;
  return {
    ok: true as const,
    row: {
      id: plunkRowId('step', r.id, r.createdAt),
      workflowId,
      projectId,
      type: config.type,
      name: str(r.name) ?? r.type,
      config: config.config,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
  };
}

/** A Plunk transition: from the TRIGGER step it is the entry edge; CONDITION and WAIT_FOR_EVENT name a branch. */
export function mapTransition(r: Row, ctx: MapContext, projectOf: (workflowId: string) => string | undefined) {
  const workflowId = parent(ctx, 'workflow', r.workflowId);
  const projectId = workflowId ? projectOf(workflowId) : undefined;
  if (!workflowId || !projectId) return fail(`its workflow ${r.workflowId} was not imported`);
  const entry = r.fromType === 'TRIGGER';
  const fromStepId = entry ? null : parent(ctx, 'step', r.fromStepId);
  if (!entry && !fromStepId) return fail(`its step ${r.fromStepId} was not imported`);
  const toStepId = parent(ctx, 'step', r.toStepId);
  if (!toStepId) return fail(`its target step ${r.toStepId} was not imported`);
  let branch = 'next';
  if (r.fromType === 'CONDITION') {
    const b = r.condition?.branch;
    branch = b === 'yes' || b === true || b === 'true' ? 'yes' : b === 'no' || b === false || b === 'false' ? 'no' : '';
    if (!branch) return fail('CONDITION transition without condition.branch yes/no');
  } else if (r.fromType === 'WAIT_FOR_EVENT') {
    branch = r.waitOutcome === 'TIMEOUT' ? 'timeout' : 'event';
  }
  return {
    ok: true as const,
    row: {
      id: plunkRowId('transition', r.id, r.createdAt),
      workflowId,
      projectId,
      fromStepId,
      toStepId,
      branch,
      createdAt: r.createdAt,
    },
  };
}
