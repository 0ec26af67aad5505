import {
  asString,
  definePlugin,
  PluginError,
  type ToolDeclaration,
} from '@zephyrcloudio/harness-plugin';

interface ShoutInput {
  readonly text: string;
}

const shout: ToolDeclaration<ShoutInput> = {
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
