// The contract's opening example in plain JavaScript: one `shout` tool that uppercases a string,
// with its own permission projection. Build it into a Worker bundle as examples/README.md shows.
import { asString, definePlugin, PluginError } from '@worker-host/sdk';

/** @type {import('@worker-host/sdk').ToolDeclaration<{ readonly text: string }>} */
const shout = {
  id: 'shout',
  description: 'Uppercase a short string.',
  inputSchema: {
    type: 'object',
    properties: { text: { type: 'string', minLength: 1 } },
    required: ['text'],
    additionalProperties: false,
  },
  permissions: async () => [{ action: 'shout', resources: ['*'], save: ['*'] }],
  execute: async (input) => {
    const text = asString(input.text);
    if (text === undefined) throw new PluginError({ message: 'Shout input is invalid.' });
    return text.toUpperCase();
  },
};

export default definePlugin({
  id: 'example.shout',
  setup: (context) => {
    context.tools.register(shout);
  },
});
