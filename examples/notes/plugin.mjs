import {
  asString,
  definePlugin,
  isWorkspaceFileError,
  PluginError,
} from '@zephyrcloudio/harness-plugin';

// A small notes plugin for the Worker host. It is bundled into one self-contained ES module
// (`pnpm example:worker-plugin`), hosted at an https URL, and added to a Session as a `Bundle`
// source. It shows the three contributions a bundle plugin can make: a tool with a permission
// projector, a hook, and a Skill. Setup may run more than once per activation, so it keeps no state.

const slug = (title) =>
  title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '') || 'untitled';

export default definePlugin({
  id: 'example.notes',
  setup: (context) => {
    const folder = asString(context.options['folder']) ?? 'notes';

    context.tools.register({
      id: 'notes_save',
      description: `Save a Markdown note in the ${folder}/ folder, replacing a note with the same title.`,
      inputSchema: {
        type: 'object',
        properties: {
          title: { type: 'string', minLength: 1, maxLength: 120 },
          body: { type: 'string', description: 'Markdown body' },
        },
        required: ['title', 'body'],
        additionalProperties: false,
      },
      // Project the exact edit permission Core must authorize, carrying the canonical path so
      // execute touches only what was approved.
      permissions: async (input, tool) => {
        const target = await context.workspaceFiles.resolvePath({
          filePath: `${folder}/${slug(input.title)}.md`,
          cwd: tool.workdir,
        });
        return [
          {
            action: 'edit',
            resources: [target.resource],
            save: ['*'],
            metadata: { canonicalPath: target.canonicalPath },
          },
        ];
      },
      execute: async (input, tool) => {
        const filePath = asString(tool.permissions[0]?.metadata?.['canonicalPath']);
        if (filePath === undefined)
          throw new PluginError({ message: 'The note path was not authorized.' });
        try {
          const written = await context.workspaceFiles.writeText({
            filePath,
            content: `# ${input.title}\n\n${input.body.trim()}\n`,
            signal: tool.signal,
          });
          return { saved: filePath, bytes: written.byteLength };
        } catch (error) {
          if (isWorkspaceFileError(error)) {
            throw new PluginError({
              message: `Note write failed: ${error.code}`,
              publicMessage: 'The note could not be saved.',
            });
          }
          throw error;
        }
      },
    });

    // Normalize note titles before validation, permission projection, and execution.
    context.hooks.register('tool.execute.before', async (event) => {
      const title = asString(event.input?.['title']);
      if (event.toolId !== 'notes_save' || title === undefined) return undefined;
      return { input: { ...event.input, title: title.trim().replace(/\s+/g, ' ') } };
    });

    context.skills.register({
      id: 'note-style',
      displayName: 'Note style',
      description: 'House style for notes saved with notes_save.',
      version: '1.0.0',
      body: [
        '# Note style',
        '',
        '- Titles are short noun phrases in sentence case.',
        '- Start the body with a one-line summary, then bullet points.',
      ].join('\n'),
      modelAdvertisement: { advertised: true, userInvocable: true },
      publicMetadata: { tags: ['notes'] },
    });
  },
});
