/**
 * Every form of AgentBench's OS data format (fixtures/agentbench-forms, one sample per form,
 * see its README) loads as the original reads it, and — on a real Docker engine — each sample
 * grades: its expert scores 1 and the wrong agent 0. The Docker part skips with the reason
 * when no engine answers or the `agentrl/os` image is missing.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { playEpisode } from "../play.js";
import { imageUnavailable } from "../docker/images.js";
import { createTaskFamily, loadOsSamples, type OsTaskFamily } from "./index.js";

const FORMS = fileURLToPath(new URL("./fixtures/agentbench-forms", import.meta.url));
const docker = new Docker();
const skip = await imageUnavailable("os", docker);

describe("AgentBench OS data forms", () => {
  test("each form loads as the original reads it", () => {
    const samples = loadOsSamples(FORMS, false);
    assert.equal(samples.length, 7);
    const [local, packages, createList, start, namedImage, pythonInit] = samples;
    const training = samples[6];
    assert.equal(local.image, "default");
    assert.deepEqual(
      local.init.map((script) => script.language),
      ["bash"],
    );
    assert.equal(local.check?.[0], null, "null in check stands for the example");
    assert.equal(local.check?.[1]?.language, "python");
    assert.match(
      local.check?.[1]?.code ?? "",
      /sys\.exit/,
      "a check `file` is read from scripts/dev/",
    );
    assert.equal(packages.image, "packages");
    assert.equal(packages.init.length, 2, "init given as a list");
    assert.equal(
      packages.init[1].code.trim(),
      "echo 42 > /opt/greeting/hello.txt",
      "an init `file` under scripts/dev/",
    );
    assert.equal(
      packages.example?.code,
      "cat /opt/greeting/hello.txt",
      "an example given as a string",
    );
    assert.equal(createList.image, "default", "create given as a list counts as no create");
    assert.deepEqual(createList.init, []);
    assert.equal(createList.check?.length, 1, "one check script, not a list");
    assert.equal(start.start?.language, "bash");
    assert.deepEqual(start.match, { answer: "77", strip: true }, "match as a string strips");
    assert.equal(namedImage.image, "some-registry/ubuntu-with-tools");
    assert.deepEqual(namedImage.match, { answer: "daemon", regex: undefined, strip: true });
    assert.deepEqual(
      pythonInit.init.map((script) => script.language),
      ["python"],
      "null in an init list is skipped",
    );
    assert.equal(training.split, "train");
    assert.match(training.init[0].code, /\/home\/box/, "training.json reads scripts/1/");
  });

  describe("on Docker", { skip }, () => {
    let family: OsTaskFamily;
    before(async () => {
      family = await createTaskFamily({ dataDir: FORMS, holdOut: false });
    });
    after(async () => {
      await family.close();
    });

    test("each form grades: the expert scores 1, the wrong agent 0", async () => {
      await Promise.all(
        family.samples.map(async (sample) => {
          const right = await playEpisode(family, sample.index, family.expert(sample.index));
          assert.equal(
            right.reward,
            1,
            `expert on form sample ${sample.index}: ${JSON.stringify(right.messages.slice(-3))}`,
          );
          const wrong = await playEpisode(family, sample.index, family.wrongExpert(sample.index));
          assert.equal(wrong.reward, 0, `wrong agent on form sample ${sample.index}`);
        }),
      );
    });
  });
});
