/**
 * The rollout's state at a checkpoint of an async run, so that a resume loses nothing:
 *
 * - `groups`: the complete groups waiting in the buffer, whole (tokens, loss masks, sampler
 *   log-probs, versions, policy ids, rewards, turns): after a resume they are trained first,
 *   under the same staleness rules;
 * - `inFlight`: the task instances whose groups were still being played: their partial
 *   episodes are not kept (their KV caches and environment sessions are gone), the instances
 *   are played again first after the resume (each one once).
 *
 * Stored as one binary file: the magic `AGRLRS01`, the byte length of a JSON header (u32,
 * little-endian), the header (every typed array replaced by `{"$array": kind, offset,
 * length}`), then the arrays' bytes, each at an offset aligned to 8. Log-probs round-trip bit
 * for bit (Float32Array as it is, not as decimal text).
 */
import { AgentRLError } from "@agentrl/spec";
import type { TrajectoryGroup } from "./types.js";

/** A task instance whose group was in flight at the checkpoint. */
export interface InFlightGroup {
  groupId: string;
  task: string;
  index: number;
}

export interface RolloutState {
  groups: TrajectoryGroup[];
  inFlight: InFlightGroup[];
}

/** A rollout state file that cannot be read (another format, truncated, corrupt). */
export class RolloutStateError extends AgentRLError {}

const MAGIC = "AGRLRS01";

const ARRAY_KINDS = {
  Int32Array,
  Uint8Array,
  Float32Array,
  Int8Array,
} as const;
type ArrayKind = keyof typeof ARRAY_KINDS;

function kindOf(value: unknown): ArrayKind | undefined {
  for (const [kind, type] of Object.entries(ARRAY_KINDS))
    if (value instanceof type) return kind as ArrayKind;
  return undefined;
}

/** Encodes the state into one binary buffer (see the file's comment). */
export function encodeRolloutState(state: RolloutState): Uint8Array {
  const arrays: { offset: number; bytes: Uint8Array }[] = [];
  let offset = 0;
  const header = JSON.stringify(state, (_key, value: unknown) => {
    const kind = kindOf(value);
    if (kind) {
      const array = value as Int32Array | Uint8Array | Float32Array | Int8Array;
      const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
      const entry = { $array: kind, offset, length: array.length };
      arrays.push({ offset, bytes });
      offset += Math.ceil(bytes.byteLength / 8) * 8;
      return entry;
    }
    // JSON has no NaN or Infinity (an environment metric may be one).
    if (typeof value === "number" && !Number.isFinite(value)) return { $number: String(value) };
    return value;
  });
  const headerBytes = new TextEncoder().encode(header);
  const start = Math.ceil((MAGIC.length + 4 + headerBytes.byteLength) / 8) * 8;
  const out = new Uint8Array(start + offset);
  out.set(new TextEncoder().encode(MAGIC), 0);
  new DataView(out.buffer).setUint32(MAGIC.length, headerBytes.byteLength, true);
  out.set(headerBytes, MAGIC.length + 4);
  for (const array of arrays) out.set(array.bytes, start + array.offset);
  return out;
}

/** Decodes what `encodeRolloutState` wrote; throws RolloutStateError on anything else. */
export function decodeRolloutState(bytes: Uint8Array): RolloutState {
  if (
    bytes.byteLength < MAGIC.length + 4 ||
    new TextDecoder().decode(bytes.subarray(0, MAGIC.length)) !== MAGIC
  ) {
    throw new RolloutStateError(`not a rollout state (no ${MAGIC} header)`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = view.getUint32(MAGIC.length, true);
  const headerEnd = MAGIC.length + 4 + headerLength;
  if (headerEnd > bytes.byteLength)
    throw new RolloutStateError(
      `the rollout state is truncated (header of ${headerLength} bytes, file of ${bytes.byteLength})`,
    );
  const start = Math.ceil(headerEnd / 8) * 8;
  let state: RolloutState;
  try {
    state = JSON.parse(
      new TextDecoder().decode(bytes.subarray(MAGIC.length + 4, headerEnd)),
      (_key, value: unknown) => {
        if (value && typeof value === "object" && "$array" in value) {
          const {
            $array: kind,
            offset,
            length,
          } = value as { $array: ArrayKind; offset: number; length: number };
          const type = ARRAY_KINDS[kind];
          if (!type) throw new RolloutStateError(`unknown array kind ${String(kind)}`);
          const byteLength = length * type.BYTES_PER_ELEMENT;
          if (start + offset + byteLength > bytes.byteLength)
            throw new RolloutStateError(
              `the rollout state is truncated (an array ends at ${start + offset + byteLength} of ${bytes.byteLength} bytes)`,
            );
          // A copy: the arrays own their memory, aligned, apart from the file's buffer (a Node
          // Buffer's slice would share its pool).
          const copy = new ArrayBuffer(byteLength);
          new Uint8Array(copy).set(bytes.subarray(start + offset, start + offset + byteLength));
          return new type(copy);
        }
        if (value && typeof value === "object" && "$number" in value)
          return Number((value as { $number: string }).$number);
        return value;
      },
    ) as RolloutState;
  } catch (error) {
    if (error instanceof RolloutStateError) throw error;
    throw new RolloutStateError(
      `the rollout state's header is not valid JSON (${(error as Error).message})`,
    );
  }
  if (!Array.isArray(state?.groups) || !Array.isArray(state?.inFlight))
    throw new RolloutStateError("the rollout state lacks groups or inFlight");
  return state;
}
