/**
 * One WebShop episode behind the function-call API, as AgentBench FC runs it: a system
 * prompt, a first user message with the search page and its available actions, then one
 * tool message per call: "Action: search[...]" / "Action: click[...]", the new page and
 * the available actions. "Buy Now" ends the episode with WebShop's score as the reward.
 */
import { FunctionCallSession, type Outcome, type ToolReply } from "../session.js";
import type { Message, ToolSpec } from "../types.js";
import type { WebShopInstance } from "./instances.js";
import { MAX_TURNS } from "./instances.js";
import { getReward } from "./reward.js";
import type { SearchEngine } from "./search.js";
import { Shop, type AvailableActions } from "./shop.js";

/** The original's tools (AgentBench `configs/tasks/webshop.yaml`). */
export const WEBSHOP_TOOLS: ToolSpec[] = [
  {
    type: "function",
    function: {
      name: "search_action",
      description: "Use search functionality with specified keywords.",
      parameters: {
        type: "object",
        properties: {
          keywords: { type: "string", description: "The keywords to use in the search function." },
        },
        required: ["keywords"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "click_action",
      description: "Click a button or link with a specified value.",
      parameters: {
        type: "object",
        properties: {
          value: {
            type: "string",
            description: "The value to click from the list of available actions.",
          },
        },
        required: ["value"],
      },
    },
  },
];

/** The original's system prompt (AgentBench `src/server/tasks/webshop/task.py`), trimmed. */
export const WEBSHOP_SYSTEM_PROMPT = `You are web shopping.
I will give you instructions about what to do.
You have to follow the instructions.
Every round I will give you an observation and a list of available actions, you have to respond with calling a tool provided based on the state and instruction.
You can use search tool if search is available.
You can click one of the buttons in clickables.
If the action is not valid, perform nothing.
Keywords in search are up to you, but the value in click must be a value in the list of available actions.
Remember that your keywords in search should be carefully designed.
You should always use a tool.`;

/** Output larger than this is cut; a results page is about 1,000 characters. */
const MAX_OUTPUT_CHARS = 4000;
const INVALID_ACTION_NOTE = "The action is not valid; nothing happened.";

export function formatActions(actions: AvailableActions): string {
  return JSON.stringify(actions);
}

export class WebShopSession extends FunctionCallSession {
  private readonly shop: Shop;

  constructor(
    readonly instance: WebShopInstance,
    engine: SearchEngine,
  ) {
    const shop = new Shop(engine, instance.goal.instruction);
    const messages: Message[] = [
      { role: "system", content: WEBSHOP_SYSTEM_PROMPT },
      {
        role: "user",
        content: `The initial observation:\n${shop.observation()}\n\nAvailable Actions:\n${formatActions(shop.availableActions())}`,
      },
    ];
    super(
      { messages, tools: WEBSHOP_TOOLS },
      { maxTurns: MAX_TURNS, maxOutputChars: MAX_OUTPUT_CHARS },
    );
    this.shop = shop;
  }

  protected override async callTool(
    name: string,
    args: Record<string, unknown>,
  ): Promise<ToolReply> {
    const argument = String(name === "search_action" ? args.keywords : args.value);
    const action = name === "search_action" ? `search[${argument}]` : `click[${argument}]`;
    const step = name === "search_action" ? this.shop.search(argument) : this.shop.click(argument);
    let outcome: Outcome | undefined;
    if (step.purchase) {
      const { product, options } = step.purchase;
      const parts = getReward(product, this.instance.goal, product.price, options);
      this.shop.setScore(parts.reward);
      outcome = {
        reward: parts.reward,
        status: "completed",
        metrics: {
          score: parts.reward,
          success: parts.reward === 1 ? 1 : 0,
          r_type: parts.rType,
          r_att: parts.rAttribute,
          r_price: parts.rPrice,
          ...(parts.rOption === undefined ? {} : { r_option: parts.rOption }),
        },
      };
    }
    const note = step.valid ? "" : `${INVALID_ACTION_NOTE}\n`;
    const content = `Action: ${action}\n\nObservation:\n${note}${this.shop.observation()}\n\nAvailable Actions:\n${formatActions(this.shop.availableActions())}`;
    return { content, outcome };
  }
}
