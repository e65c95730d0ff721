/**
 * Input schemas shared by several tools (zod, turned into JSON Schema for the MCP host by the SDK).
 *
 * @module
 */
import * as z from 'zod';

const condition = z
  .object({
    field: z
      .string()
      .describe(
        'email, subscribed, createdAt, updatedAt, data.<key> (a contact attribute, e.g. data.plan), event.<name> (e.g. event.purchase), or email.<activity> (sent, delivered, opened, clicked, bounced, complained)',
      ),
    operator: z
      .string()
      .describe(
        'equals, notEquals, contains, notContains, startsWith, endsWith, greaterThan, lessThan, in, notIn, exists, notExists, within, notWithin, … (which apply depends on the field; the API names a wrong one)',
      ),
    value: z
      .unknown()
      .optional()
      .describe('what the field is compared with; a list for in/notIn; absent for exists/notExists'),
    unit: z
      .string()
      .optional()
      .describe('minutes, hours, days, weeks or months: the unit of value for within/notWithin'),
  })
  .describe('one condition {field, operator, value?, unit?}');

/** A segment filter: conditions that must all match, or groups of them combined with AND/OR. */
export const filterSchema = z
  .union([
    z.array(condition),
    z.object({
      logic: z.enum(['AND', 'OR']).optional().describe('how the groups combine (AND by default)'),
      groups: z.array(z.object({ filters: z.array(condition).describe('conditions that must all match') })),
    }),
  ])
  .describe(
    'Which contacts match: an array of conditions that must all match, e.g. [{"field":"data.plan","operator":"equals","value":"pro"}], or {logic, groups:[{filters:[…]}]}',
  );

/** A contact's attributes (`data`): keys merged into what is stored; a key set to null is removed. */
export const contactDataSchema = z
  .record(z.string(), z.unknown())
  .describe('contact attributes to merge (a key set to null is removed)');
