/**
 * Random weights of a model's exact shape written straight to a safetensors file (BF16 by
 * default, as real checkpoints ship), one tensor at a time and without tfjs: a 0.5B model is
 * ~1 GB on disk and never needs 2 GB of float32 in memory to be made. Same initialisation as
 * a fresh `Transformer`: normal σ 0.02, residual outputs (o_proj, down_proj) σ 0.02/√(2·layers),
 * norms 1, biases 0.
 */
import { open, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { type ModelConfig } from "./config.js";
import { expectedWeightNames } from "./weights.js";
import { Rng } from "./rng.js";
import { SAFETENSORS_FILE, type SafetensorsDtype } from "./safetensors.js";

export interface RandomWeightsOptions {
  /** Default 0. */
  seed?: number;
  /** "BF16" (default), "F16" is not offered: BF16 or F32 only. */
  dtype?: Extract<SafetensorsDtype, "BF16" | "F32">;
}

/** HF-layout shape of each weight name of a config. */
export function hfWeightShapes(config: ModelConfig): Map<string, number[]> {
  const { hiddenSize: d, intermediateSize: m, vocabSize: V, headDim } = config;
  const q = config.numAttentionHeads * headDim;
  const kv = config.numKeyValueHeads * headDim;
  const shapes = new Map<string, number[]>();
  for (const name of expectedWeightNames(config)) {
    const module = name.split(".").at(-2) ?? "";
    let shape: number[];
    if (name === "model.embed_tokens.weight" || name === "lm_head.weight") shape = [V, d];
    else if (name.endsWith("norm.weight")) shape = [d];
    else if (name.endsWith(".bias")) shape = [module === "q_proj" ? q : kv];
    else if (module === "q_proj") shape = [q, d];
    else if (module === "k_proj" || module === "v_proj") shape = [kv, d];
    else if (module === "o_proj") shape = [d, q];
    else if (module === "gate_proj" || module === "up_proj") shape = [m, d];
    else if (module === "down_proj") shape = [d, m];
    else throw new Error(`no shape for ${name}`);
    shapes.set(name, shape);
  }
  return shapes;
}

/** Writes `directory/model.safetensors` with random weights of the config's shape. Returns its size in bytes. */
export async function writeRandomSafetensors(
  directory: string,
  config: ModelConfig,
  options: RandomWeightsOptions = {},
): Promise<number> {
  const dtype = options.dtype ?? "BF16";
  const bytesPerValue = dtype === "BF16" ? 2 : 4;
  const shapes = hfWeightShapes(config);
  const header: Record<string, unknown> = {
    __metadata__: { format: "pt", agentrl_random: "true" },
  };
  let offset = 0;
  for (const [name, shape] of shapes) {
    const size = shape.reduce((a, b) => a * b, 1) * bytesPerValue;
    header[name] = { dtype, shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  let headerText = JSON.stringify(header);
  headerText += " ".repeat((8 - ((8 + Buffer.byteLength(headerText)) % 8)) % 8); // data 8-byte aligned
  const headerBytes = Buffer.from(headerText, "utf8");
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(headerBytes.length));
  await mkdir(directory, { recursive: true });
  const file = await open(join(directory, SAFETENSORS_FILE), "w");
  try {
    await file.write(prefix);
    await file.write(headerBytes);
    const rng = new Rng(options.seed ?? 0);
    const residualStd = 0.02 / Math.sqrt(2 * config.numHiddenLayers);
    const chunk = 1 << 20;
    const values = new Float32Array(chunk);
    const bits = new Uint32Array(values.buffer);
    const halves = new Uint16Array(chunk);
    for (const [name, shape] of shapes) {
      const count = shape.reduce((a, b) => a * b, 1);
      const module = name.split(".").at(-2) ?? "";
      const fill = name.endsWith("norm.weight") ? 1 : name.endsWith(".bias") ? 0 : undefined;
      const std = module === "o_proj" || module === "down_proj" ? residualStd : 0.02;
      for (let start = 0; start < count; start += chunk) {
        const length = Math.min(chunk, count - start);
        if (fill !== undefined) values.fill(fill, 0, length);
        else
          for (let i = 0; i < length; i += 2) {
            // Box–Muller: two normals from two uniforms
            const radius = std * Math.sqrt(-2 * Math.log(1 - rng.next()));
            const angle = 2 * Math.PI * rng.next();
            values[i] = radius * Math.cos(angle);
            if (i + 1 < length) values[i + 1] = radius * Math.sin(angle);
          }
        if (dtype === "F32") {
          await file.write(new Uint8Array(values.buffer, 0, length * 4));
        } else {
          for (let i = 0; i < length; i++) {
            const b = bits[i];
            halves[i] = (b + 0x7fff + ((b >>> 16) & 1)) >>> 16; // round to nearest even
          }
          await file.write(new Uint8Array(halves.buffer, 0, length * 2));
        }
      }
    }
  } finally {
    await file.close();
  }
  return 8 + headerBytes.length + offset;
}
