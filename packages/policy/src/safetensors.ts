/**
 * The safetensors format (https://huggingface.co/docs/safetensors), read and written here:
 *
 *   [u64 little-endian header length N][N bytes of JSON header, space-padded][raw tensor bytes]
 *   header: { "<name>": { "dtype": "F32", "shape": [..], "data_offsets": [begin, end] }, "__metadata__": {..} }
 *
 * Reads F32, F16 and BF16 (converted to float32); writes F32 (bit-exact), F16 or BF16.
 * Sharded checkpoints: `model-0000N-of-0000M.safetensors` plus `model.safetensors.index.json`
 * (`{ metadata: { total_size }, weight_map: { name: file } }`).
 */
import { AgentRLError } from "@agentrl/spec";
import { readFile, writeFile, mkdir, access, rm } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { NamedWeight } from "./model.js";

export type SafetensorsDtype = "F32" | "F16" | "BF16";

/** A file that is not valid safetensors, or a dtype we do not read. */
export class SafetensorsError extends AgentRLError {}

const BYTES_PER_ELEMENT: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2 };

const HeaderEntrySchema = z.object({
  dtype: z.string(),
  shape: z.array(z.number().int().nonnegative()),
  data_offsets: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]),
});

/** One tensor's place in a safetensors file. */
interface SafetensorsEntry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** its bytes within the file */
  bytes: Uint8Array;
}

/** Reads a safetensors file's header: every tensor's dtype, shape and bytes (not decoded). */
function safetensorsEntries(bytes: Uint8Array, source: string): SafetensorsEntry[] {
  if (bytes.byteLength < 8) throw new SafetensorsError(`${source}: file too short`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  if (8 + headerLength > bytes.byteLength)
    throw new SafetensorsError(`${source}: header length ${headerLength} exceeds file size`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
  } catch (error) {
    throw new SafetensorsError(`${source}: header is not JSON (${(error as Error).message})`);
  }
  const dataStart = 8 + headerLength;
  const entries: SafetensorsEntry[] = [];
  for (const [name, raw] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const parsed = HeaderEntrySchema.safeParse(raw);
    if (!parsed.success) throw new SafetensorsError(`${source}: bad header entry for ${name}`);
    const {
      dtype,
      shape,
      data_offsets: [begin, end],
    } = parsed.data;
    if (!(dtype in BYTES_PER_ELEMENT))
      throw new SafetensorsError(
        `${source}: ${name} has dtype ${dtype}; only F32, F16 and BF16 are read`,
      );
    const count = shape.reduce((a, b) => a * b, 1);
    if (
      end - begin !== count * BYTES_PER_ELEMENT[dtype as SafetensorsDtype] ||
      dataStart + end > bytes.byteLength
    ) {
      throw new SafetensorsError(
        `${source}: ${name} offsets [${begin}, ${end}] do not match shape [${shape}] ${dtype}`,
      );
    }
    entries.push({
      name,
      dtype: dtype as SafetensorsDtype,
      shape,
      bytes: bytes.subarray(dataStart + begin, dataStart + end),
    });
  }
  return entries;
}

/** Parses one safetensors file into float32 tensors (copies; F16/BF16 widened). */
export function parseSafetensors(
  bytes: Uint8Array,
  source = "safetensors",
): Map<string, NamedWeight> {
  const tensors = new Map<string, NamedWeight>();
  for (const { name, dtype, shape, bytes: data } of safetensorsEntries(bytes, source)) {
    tensors.set(name, {
      name,
      shape,
      data: decode(
        data,
        dtype,
        shape.reduce((a, b) => a * b, 1),
      ),
    });
  }
  return tensors;
}

/**
 * A model directory's safetensors, kept as the files' bytes (BF16 stays 2 bytes a value) and
 * decoded to float32 one tensor at a time: loading a model holds the files plus one widened
 * tensor, never every tensor widened at once.
 */
export class SafetensorsReader {
  private constructor(private readonly entries: Map<string, SafetensorsEntry>) {}

  /** Reads `model.safetensors`, or every shard listed in `model.safetensors.index.json` (headers checked, data not decoded). */
  static async open(directory: string): Promise<SafetensorsReader> {
    const entries = new Map<string, SafetensorsEntry>();
    const indexPath = join(directory, SAFETENSORS_INDEX_FILE);
    if (await exists(indexPath)) {
      const parsed = IndexSchema.safeParse(JSON.parse(await readFile(indexPath, "utf8")));
      if (!parsed.success)
        throw new SafetensorsError(`${indexPath}: not a safetensors index (weight_map missing)`);
      for (const file of new Set(Object.values(parsed.data.weight_map))) {
        for (const entry of safetensorsEntries(await readFile(join(directory, file)), file))
          entries.set(entry.name, entry);
      }
      const missing = Object.keys(parsed.data.weight_map).filter((name) => !entries.has(name));
      if (missing.length > 0)
        throw new SafetensorsError(`${indexPath}: shards lack ${missing.slice(0, 3).join(", ")}`);
      return new SafetensorsReader(entries);
    }
    const singlePath = join(directory, SAFETENSORS_FILE);
    if (!(await exists(singlePath)))
      throw new SafetensorsError(
        `no ${SAFETENSORS_FILE} or ${SAFETENSORS_INDEX_FILE} in ${directory}`,
      );
    for (const entry of safetensorsEntries(await readFile(singlePath), singlePath))
      entries.set(entry.name, entry);
    return new SafetensorsReader(entries);
  }

  names(): string[] {
    return [...this.entries.keys()];
  }

  shape(name: string): number[] {
    return this.entry(name).shape.slice();
  }

  /** The tensor's values widened to float32 (a new array). */
  read(name: string): NamedWeight {
    const { shape, dtype, bytes } = this.entry(name);
    return {
      name,
      shape: shape.slice(),
      data: decode(
        bytes,
        dtype,
        shape.reduce((a, b) => a * b, 1),
      ),
    };
  }

  private entry(name: string): SafetensorsEntry {
    const entry = this.entries.get(name);
    if (!entry) throw new SafetensorsError(`no tensor ${name}`);
    return entry;
  }
}

function decode(bytes: Uint8Array, dtype: SafetensorsDtype, count: number): Float32Array {
  const copy = new Uint8Array(bytes.byteLength); // aligned copy (Buffer.slice would share memory)
  copy.set(bytes);
  if (dtype === "F32") return new Float32Array(copy.buffer, 0, count);
  const halves = new Uint16Array(copy.buffer, 0, count);
  const out = new Float32Array(count);
  if (dtype === "BF16") {
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < count; i++) bits[i] = halves[i] << 16;
  } else {
    for (let i = 0; i < count; i++) out[i] = halfToFloat(halves[i]);
  }
  return out;
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * Math.pow(2, -14) * (fraction / 1024);
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * Math.pow(2, exponent - 15) * (1 + fraction / 1024);
}

const float32Scratch = new Float32Array(1);
const uint32Scratch = new Uint32Array(float32Scratch.buffer);

/** float32 → bfloat16 bits, round to nearest even. */
export function floatToBfloat16(value: number): number {
  float32Scratch[0] = value;
  const bits = uint32Scratch[0];
  if ((bits & 0x7f800000) === 0x7f800000 && bits & 0x7fffff) return ((bits >>> 16) | 0x40) & 0xffff; // NaN stays NaN
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** float32 → IEEE half bits, round to nearest. */
export function floatToHalf(value: number): number {
  float32Scratch[0] = value;
  const bits = uint32Scratch[0];
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  const mantissa = bits & 0x7fffff;
  if (((bits >>> 23) & 0xff) === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  if (exponent >= 31) return sign | 0x7c00;
  if (exponent <= 0) {
    if (exponent < -10) return sign;
    const m = (mantissa | 0x800000) >>> (1 - exponent);
    return sign | ((m + 0x1000) >>> 13);
  }
  return (sign | (exponent << 10) | (mantissa >>> 13)) + ((mantissa >>> 12) & 1);
}

function encode(data: Float32Array, dtype: SafetensorsDtype): Uint8Array {
  if (dtype === "F32") return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint16Array(data.length);
  const convert = dtype === "BF16" ? floatToBfloat16 : floatToHalf;
  for (let i = 0; i < data.length; i++) out[i] = convert(data[i]);
  return new Uint8Array(out.buffer);
}

export interface SerializeOptions {
  /** Stored dtype; default "F32" (bit-exact). */
  dtype?: SafetensorsDtype;
  /** String metadata for `__metadata__`; default `{ format: "pt" }`. */
  metadata?: Record<string, string>;
}

/** One safetensors file holding `weights` (in the given order). */
export function serializeSafetensors(
  weights: NamedWeight[],
  options: SerializeOptions = {},
): Uint8Array {
  const dtype = options.dtype ?? "F32";
  const header: Record<string, unknown> = { __metadata__: options.metadata ?? { format: "pt" } };
  const payloads: Uint8Array[] = [];
  let offset = 0;
  for (const weight of weights) {
    const count = weight.shape.reduce((a, b) => a * b, 1);
    if (count !== weight.data.length)
      throw new SafetensorsError(
        `${weight.name}: shape [${weight.shape}] but ${weight.data.length} values`,
      );
    const bytes = encode(weight.data, dtype);
    header[weight.name] = {
      dtype,
      shape: weight.shape,
      data_offsets: [offset, offset + bytes.byteLength],
    };
    payloads.push(bytes);
    offset += bytes.byteLength;
  }
  let headerText = JSON.stringify(header);
  headerText += " ".repeat((8 - ((8 + Buffer.byteLength(headerText)) % 8)) % 8);
  const headerBytes = new TextEncoder().encode(headerText);
  const out = new Uint8Array(8 + headerBytes.byteLength + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.byteLength), true);
  out.set(headerBytes, 8);
  let position = 8 + headerBytes.byteLength;
  for (const payload of payloads) {
    out.set(payload, position);
    position += payload.byteLength;
  }
  return out;
}

export const SAFETENSORS_FILE = "model.safetensors";
export const SAFETENSORS_INDEX_FILE = "model.safetensors.index.json";

const IndexSchema = z.object({
  metadata: z.record(z.string(), z.unknown()).optional(),
  weight_map: z.record(z.string(), z.string()),
});

/** Reads `model.safetensors`, or every shard listed in `model.safetensors.index.json`, widened to float32. */
export async function readSafetensorsDirectory(
  directory: string,
): Promise<Map<string, NamedWeight>> {
  const reader = await SafetensorsReader.open(directory);
  return new Map(reader.names().map((name) => [name, reader.read(name)]));
}

export interface WriteDirectoryOptions extends SerializeOptions {
  /** Start a new shard when one would exceed this many bytes; default Infinity (one file). */
  maxShardBytes?: number;
}

/** Writes `model.safetensors`, or shards `model-0000N-of-0000M.safetensors` with an index. Returns the file names. */
export async function writeSafetensorsDirectory(
  directory: string,
  weights: NamedWeight[],
  options: WriteDirectoryOptions = {},
): Promise<string[]> {
  await mkdir(directory, { recursive: true });
  const bytesPerElement = BYTES_PER_ELEMENT[options.dtype ?? "F32"];
  const limit = options.maxShardBytes ?? Infinity;
  const shards: NamedWeight[][] = [[]];
  let shardBytes = 0;
  for (const weight of weights) {
    const size = weight.data.length * bytesPerElement;
    if (shardBytes > 0 && shardBytes + size > limit) {
      shards.push([]);
      shardBytes = 0;
    }
    shards[shards.length - 1].push(weight);
    shardBytes += size;
  }
  if (shards.length === 1) {
    await rm(join(directory, SAFETENSORS_INDEX_FILE), { force: true }); // a stale index would win on load
    await writeFile(join(directory, SAFETENSORS_FILE), serializeSafetensors(weights, options));
    return [SAFETENSORS_FILE];
  }
  const pad = (n: number) => String(n).padStart(5, "0");
  const names = shards.map((_, i) => `model-${pad(i + 1)}-of-${pad(shards.length)}.safetensors`);
  const weightMap: Record<string, string> = {};
  let totalSize = 0;
  for (const [i, shard] of shards.entries()) {
    await writeFile(join(directory, names[i]), serializeSafetensors(shard, options));
    for (const weight of shard) {
      weightMap[weight.name] = names[i];
      totalSize += weight.data.length * bytesPerElement;
    }
  }
  await writeFile(
    join(directory, SAFETENSORS_INDEX_FILE),
    JSON.stringify({ metadata: { total_size: totalSize }, weight_map: weightMap }, null, 2) + "\n",
  );
  return [...names, SAFETENSORS_INDEX_FILE];
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
