/**
 * Run logs: one JSON line of metrics per step (`metrics.jsonl`), and TensorBoard event files
 * (`tensorboard/events.out.tfevents.*`) written in pure TypeScript so that every backend
 * gets them (tfjs-node's own summary writer exists only on the native backend).
 *
 * The event file is a TFRecord stream of `tensorflow.Event` protocol buffers:
 *   record = uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
 *   Event  = { 1: wall_time double, 2: step int64, 3: file_version string, 5: summary Summary }
 *   Summary = { 1: repeated Value }   Value = { 1: tag string, 2: simple_value float }
 */
import { appendFileSync, mkdirSync, openSync, writeSync, closeSync, fsyncSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";

/** Flat metrics of one step: name → number. Nested names use `/` (`reward/kg`). */
export type Metrics = Record<string, number>;

export class JsonlWriter {
  constructor(readonly path: string) {
    mkdirSync(join(path, ".."), { recursive: true });
  }
  write(record: Record<string, unknown>): void {
    appendFileSync(this.path, `${JSON.stringify(record)}\n`);
  }
}

// --- CRC32C (Castagnoli), as TFRecord requires ------------------------------------------
const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[i] = c >>> 0;
  }
  return table;
})();

export function crc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = CRC_TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function maskedCrc(bytes: Uint8Array): number {
  const crc = crc32c(bytes);
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

// --- A minimal protocol buffer encoder --------------------------------------------------
class ProtoWriter {
  private bytes: number[] = [];
  private varint(value: number | bigint): void {
    let v = BigInt(value);
    while (v > 0x7fn) {
      this.bytes.push(Number((v & 0x7fn) | 0x80n));
      v >>= 7n;
    }
    this.bytes.push(Number(v));
  }
  private key(field: number, wireType: number): void {
    this.varint((field << 3) | wireType);
  }
  double(field: number, value: number): this {
    this.key(field, 1);
    const buffer = new DataView(new ArrayBuffer(8));
    buffer.setFloat64(0, value, true);
    for (let i = 0; i < 8; i++) this.bytes.push(buffer.getUint8(i));
    return this;
  }
  float(field: number, value: number): this {
    this.key(field, 5);
    const buffer = new DataView(new ArrayBuffer(4));
    buffer.setFloat32(0, value, true);
    for (let i = 0; i < 4; i++) this.bytes.push(buffer.getUint8(i));
    return this;
  }
  int64(field: number, value: number): this {
    this.key(field, 0);
    this.varint(value);
    return this;
  }
  bytesField(field: number, value: Uint8Array): this {
    this.key(field, 2);
    this.varint(value.length);
    for (const b of value) this.bytes.push(b);
    return this;
  }
  string(field: number, value: string): this {
    return this.bytesField(field, new TextEncoder().encode(value));
  }
  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}

function tfRecord(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(8 + 4 + data.length + 4);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(data.length), true);
  view.setUint32(8, maskedCrc(out.subarray(0, 8)), true);
  out.set(data, 12);
  view.setUint32(12 + data.length, maskedCrc(data), true);
  return out;
}

/** Writes scalar summaries readable by TensorBoard. */
export class TensorBoardWriter {
  private readonly fd: number;
  readonly path: string;

  constructor(folder: string) {
    mkdirSync(folder, { recursive: true });
    const now = Date.now() / 1000;
    this.path = join(folder, `events.out.tfevents.${Math.floor(now)}.${hostname()}.${process.pid}`);
    this.fd = openSync(this.path, "a");
    this.writeEvent(
      new ProtoWriter().double(1, now).int64(2, 0).string(3, "brain.Event:2").finish(),
    );
  }

  /** One event with a scalar per metric, at `step`. Non-finite values are skipped. */
  scalars(step: number, metrics: Metrics, wallTime = Date.now() / 1000): void {
    const summary = new ProtoWriter();
    for (const [tag, value] of Object.entries(metrics)) {
      if (!Number.isFinite(value)) continue;
      summary.bytesField(1, new ProtoWriter().string(1, tag).float(2, value).finish());
    }
    this.writeEvent(
      new ProtoWriter().double(1, wallTime).int64(2, step).bytesField(5, summary.finish()).finish(),
    );
  }

  private writeEvent(event: Uint8Array): void {
    writeSync(this.fd, tfRecord(event));
  }

  close(): void {
    try {
      fsyncSync(this.fd);
    } finally {
      closeSync(this.fd);
    }
  }
}

/** Reads back the scalars of an event file (for tests and `agentrl` tools). */
export function readTensorBoardScalars(
  bytes: Uint8Array,
): { step: number; tag: string; value: number }[] {
  const out: { step: number; tag: string; value: number }[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 0;
  while (offset + 12 <= bytes.length) {
    const length = Number(view.getBigUint64(offset, true));
    if (view.getUint32(offset + 8, true) !== maskedCrc(bytes.subarray(offset, offset + 8)))
      throw new Error("corrupt record length");
    const data = bytes.subarray(offset + 12, offset + 12 + length);
    if (view.getUint32(offset + 12 + length, true) !== maskedCrc(data))
      throw new Error("corrupt record data");
    offset += 16 + length;
    let step = 0;
    for (const field of readFields(data)) {
      if (field.number === 2) step = Number(field.varint);
      if (field.number === 5 && field.bytes) {
        for (const value of readFields(field.bytes)) {
          if (value.number !== 1 || !value.bytes) continue;
          let tag = "";
          let scalar = NaN;
          for (const part of readFields(value.bytes)) {
            if (part.number === 1 && part.bytes) tag = new TextDecoder().decode(part.bytes);
            if (part.number === 2 && part.fixed32 !== undefined) scalar = part.fixed32;
          }
          out.push({ step, tag, value: scalar });
        }
      }
    }
  }
  return out;
}

function* readFields(
  data: Uint8Array,
): Generator<{ number: number; varint?: bigint; bytes?: Uint8Array; fixed32?: number }> {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = data[i++];
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (i < data.length) {
    const key = Number(varint());
    const number = key >> 3;
    const wire = key & 7;
    if (wire === 0) yield { number, varint: varint() };
    else if (wire === 1) {
      i += 8;
      yield { number };
    } else if (wire === 2) {
      const n = Number(varint());
      yield { number, bytes: data.subarray(i, i + n) };
      i += n;
    } else if (wire === 5) {
      const v = view.getFloat32(i, true);
      i += 4;
      yield { number, fixed32: v };
    } else throw new Error(`unsupported wire type ${wire}`);
  }
}
