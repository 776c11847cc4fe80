/**
 * End-to-end check of the importance ratio's two sides on the shipped warm-start model:
 * the log-prob the rollout engine's sampler records for each generated token ("old"
 * log-probs: batched decode with KV caches, prefix-cache forks, caches kept between turns,
 * environment replies fed through decode steps, chunked and batched prefill) must equal the
 * log-prob the trainer recomputes for the same token with the same weights on its own path
 * (prepareBatch → withoutUntrainedTail → planMicroBatches → toTensors → tokenLogProbs at the
 * GRPO temperature, right-padded micro-batches), token by token, on every turn.
 *
 * A few multi-turn `kg` and `alfworld` episodes at temperature 0.8, several decoding at once.
 * Skipped when models/warmstart is missing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as tf from "@tensorflow/tfjs-core";
import {
  InProcessEnvironmentClient,
  createTaskFamily,
  type CurriculumTaskFamily,
} from "@agentrl/envs";
import { Policy, initBackend, tokenLogProbs } from "@agentrl/policy";
import {
  PolicyPool,
  RolloutScheduler,
  TrajectoryBuffer,
  createPolicyEngine,
  type Trajectory,
  type TrajectoryGroup,
} from "@agentrl/rollout";
import { policyObjective } from "./algorithms.js";
import {
  planMicroBatches,
  prepareBatch,
  toTensors,
  withoutUntrainedTail,
  type TrainingRow,
} from "./grpo.js";
import { Learner } from "./learner.js";

const MODEL = fileURLToPath(new URL("../../../../models/warmstart", import.meta.url));
const HAVE_MODEL =
  existsSync(`${MODEL}/model.safetensors`) && existsSync(`${MODEL}/tokenizer.json`);
const TEMPERATURE = 0.8;
const TOLERANCE = 2e-3;

/** |old − new| statistics of one bucket of tokens. */
class Differences {
  count = 0;
  sum = 0;
  max = 0;
  add(difference: number): void {
    this.count += 1;
    this.sum += difference;
    this.max = Math.max(this.max, difference);
  }
  describe(): string {
    return `${this.count} tokens, max |Δ| ${this.max.toExponential(2)}, mean |Δ| ${(this.sum / Math.max(1, this.count)).toExponential(2)}`;
  }
}

/** Plays `groups` groups of `groupSize` episodes of `task` with the real rollout engine (current policy only). */
async function playGroups(
  sampler: Policy,
  family: CurriculumTaskFamily,
  groups: number,
  groupSize: number,
  seed: number,
): Promise<{ groups: TrajectoryGroup[]; meanDecodeBatch: number; reused: number; fed: number }> {
  const client = new InProcessEnvironmentClient([family]);
  // What `agentrl train` builds (loop.ts makeSampling): engine at the rollout temperature, decode batch = concurrency.
  const engine = createPolicyEngine(sampler, {
    temperature: TEMPERATURE,
    maxBatchSize: groups * groupSize,
    maxSequenceLength: 1280,
    seed,
  });
  const pool = new PolicyPool({ current: engine, seed });
  const buffer = new TrajectoryBuffer({ capacityGroups: groups });
  const scheduler = new RolloutScheduler({
    client,
    tokenizer: sampler.tokenizer!,
    pool,
    buffer,
    tasks: [{ name: family.name, indices: family.indicesAt("train", 0).slice(0, 200) }],
    groupSize,
    maxConcurrentEpisodes: groups * groupSize,
    maxGroups: groups,
    seed,
    episode: { temperature: TEMPERATURE, maxTurns: 5, maxTokens: 1280, maxNewTokensPerTurn: 96 },
  });
  try {
    await scheduler.start();
    const stats = engine.stats();
    return {
      groups: buffer.takeAvailable(),
      meanDecodeBatch: stats.meanBatchSize,
      reused: stats.reusedCacheTokens,
      fed: stats.decodeFedTokens,
    };
  } finally {
    engine.close();
    buffer.close();
  }
}

test(
  "the trainer's recomputed log-probs equal the sampler's on every generated token of multi-turn episodes",
  { skip: HAVE_MODEL ? false : `no ${MODEL}` },
  async () => {
    await initBackend({ log: null });
    const sampler = await Policy.load(MODEL, { trainable: false });
    const learner = await Learner.load(MODEL, {
      grpo: { klCoefficient: 0, temperature: TEMPERATURE },
      gradientThreads: 1,
    });
    try {
      const groups: TrajectoryGroup[] = [];
      for (const [task, seed] of [
        ["kg", 11],
        ["alfworld", 12],
      ] as const) {
        const family = await createTaskFamily(task, { seed: 0 });
        const played = await playGroups(sampler, family, 2, 3, seed);
        console.log(
          `${task}: ${played.groups
            .flatMap((g) => g.trajectories)
            .map((t) => `${t.turns.length} turns/${t.tokens.length} tokens (${t.status})`)
            .join(
              ", ",
            )}; mean decode batch ${played.meanDecodeBatch.toFixed(2)}, reused cache tokens ${played.reused}, decode-fed tokens ${played.fed}`,
        );
        assert.ok(
          played.meanDecodeBatch > 1.5,
          `episodes decoded in batches (mean decode batch ${played.meanDecodeBatch})`,
        );
        groups.push(...played.groups);
      }
      const trajectories = groups.flatMap((group) => group.trajectories);
      assert.ok(
        trajectories.some((t) => t.turns.length >= 2),
        "at least one multi-turn episode",
      );

      // The trainer's own path, as GrpoShard runs it (all groups kept: uniform rewards or not, the log-probs are the same).
      const { grpo } = learner.options;
      const batch = prepareBatch(groups, { ...grpo, skipUniformGroups: false });
      const byTokens = new Map(trajectories.map((t) => [t.tokens, t]));
      const source = new Map<TrainingRow, Trajectory>();
      const rows = batch.rows.map((row) => {
        const trimmed = withoutUntrainedTail(row);
        source.set(trimmed, byTokens.get(row.tokens)!);
        return trimmed;
      });
      const plan = planMicroBatches(rows, 2048);
      assert.ok(
        plan.some((micro) => micro.length > 1),
        "some micro-batch pads several rows together",
      );

      const overall = new Differences();
      const perTurn = new Map<number, Differences>();
      const perTask = new Map<string, Differences>();
      let worst = { difference: 0, where: "" };
      let maxRatioDeviation = 0;
      for (const micro of plan) {
        const m = toTensors(micro);
        try {
          const scored = tf.tidy(
            () =>
              tokenLogProbs(learner.policy.model, m.inputIds, {
                temperature: grpo.temperature,
                mask: m.mask,
              }).logProbs,
          );
          // The PPO objective on these log-probs, every token with advantage 1: no ratio may exceed 1 + ε_high.
          const clipped = tf.tidy(
            () =>
              policyObjective(
                {
                  logProbs: scored,
                  oldLogProbs: m.oldLogProbs,
                  advantages: tf.onesLike(m.advantages),
                  mask: m.mask,
                },
                { ...grpo, klCoefficient: 0, entropyCoefficient: 0 },
                { tokenCount: batch.tokenCount, sequenceCount: batch.rows.length },
              ).clipFraction,
          );
          const fresh = scored.dataSync();
          const old = m.oldLogProbs.dataSync();
          const mask = m.mask.dataSync();
          const clipFraction = clipped.dataSync()[0];
          tf.dispose([scored, clipped]);
          assert.equal(clipFraction, 0, "no token's ratio leaves the clip range");
          const width = m.inputIds.shape[1];
          micro.forEach((row, b) => {
            const trajectory = source.get(row)!;
            for (let position = 1; position < width; position++) {
              const k = b * (width - 1) + position - 1;
              const trained = position < row.tokens.length && row.lossMask[position] === 1;
              assert.equal(
                mask[k],
                trained ? 1 : 0,
                "the tensor mask is the loss mask, shifted by one",
              );
              if (!trained) continue;
              const turn = trajectory.turns.findIndex(
                (record) => position >= record.generated[0] && position < record.generated[1],
              );
              assert.ok(turn >= 0, `trained token ${position} lies in a generated range`);
              assert.equal(old[k], trajectory.logprobs[position]);
              const difference = Math.abs(fresh[k] - old[k]);
              overall.add(difference);
              if (!perTurn.has(turn)) perTurn.set(turn, new Differences());
              perTurn.get(turn)!.add(difference);
              if (!perTask.has(trajectory.task)) perTask.set(trajectory.task, new Differences());
              perTask.get(trajectory.task)!.add(difference);
              maxRatioDeviation = Math.max(
                maxRatioDeviation,
                Math.abs(Math.exp(fresh[k] - old[k]) - 1),
              );
              if (difference > worst.difference)
                worst = {
                  difference,
                  where: `${trajectory.groupId}#${trajectory.member} turn ${turn} position ${position}: old ${old[k]} new ${fresh[k]}`,
                };
            }
          });
        } finally {
          tf.dispose([m.inputIds, m.mask, m.oldLogProbs, m.advantages]);
        }
      }
      console.log(
        `backend ${tf.getBackend()}, temperature ${grpo.temperature}; all generated tokens: ${overall.describe()}; max |ratio − 1| ${maxRatioDeviation.toExponential(2)}`,
      );
      for (const [task, d] of perTask) console.log(`  task ${task}: ${d.describe()}`);
      for (const [turn, d] of [...perTurn].sort((a, b) => a[0] - b[0]))
        console.log(`  turn ${turn}: ${d.describe()}`);
      if (worst.where) console.log(`  largest: ${worst.where}`);

      assert.equal(overall.count, batch.tokenCount, "every generated token was compared");
      assert.ok(
        [...perTurn.keys()].some((turn) => turn >= 1),
        "tokens of later turns were compared",
      );
      assert.ok(
        overall.max < TOLERANCE,
        `max |old − new| ${overall.max} ≥ ${TOLERANCE} (${worst.where})`,
      );
      for (const [turn, d] of perTurn)
        assert.ok(d.max < TOLERANCE, `turn ${turn}: ${d.describe()}`);
    } finally {
      sampler.dispose();
      await learner.dispose();
    }
  },
);
