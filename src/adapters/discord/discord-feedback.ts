/**
 * Feedback on an answer in Discord: 👍 / 👎 buttons under the answer (their ids name the run), beside
 * a link to the run's trace (GLASSBOX_PUBLIC_URL), and the modal a 👎 opens to ask for an optional reason.
 */
import {
  ActionRowBuilder,
  ButtonBuilder,
  ButtonStyle,
  LabelBuilder,
  ModalBuilder,
  TextInputBuilder,
  TextInputStyle,
} from "discord.js";
import { MAX_REASON_CHARS, type Rating } from "../../agent/feedback.js";

export const REASON_INPUT = "reason";

export const feedbackId = (rating: Rating, runId: string) => `glassbox:feedback:${rating}:${runId}`;
export const reasonModalId = (runId: string) => `glassbox:reason:${runId}`;

/** A feedback button's id: the rating and the run; undefined for another button. */
export function feedbackButton(customId: string): { rating: Rating; runId: string } | undefined {
  const match = /^glassbox:feedback:(up|down):(\S{1,80})$/.exec(customId);
  return match ? { rating: match[1] as Rating, runId: match[2] as string } : undefined;
}

/** The run a reason modal's id names; undefined for another modal. */
export function reasonModalRun(customId: string): string | undefined {
  return /^glassbox:reason:(\S{1,80})$/.exec(customId)?.[1];
}

/** 👍 / 👎, and a link button (style 5, no interaction) to the run's trace when there is a `traceUrl`. */
export function feedbackRow(runId: string, traceUrl?: string): ActionRowBuilder<ButtonBuilder> {
  const row = new ActionRowBuilder<ButtonBuilder>().addComponents(
    new ButtonBuilder().setCustomId(feedbackId("up", runId)).setEmoji("👍").setStyle(ButtonStyle.Secondary),
    new ButtonBuilder().setCustomId(feedbackId("down", runId)).setEmoji("👎").setStyle(ButtonStyle.Secondary),
  );
  if (traceUrl) row.addComponents(new ButtonBuilder().setLabel("Trace").setStyle(ButtonStyle.Link).setURL(traceUrl));
  return row;
}

export function reasonModal(runId: string): ModalBuilder {
  return new ModalBuilder()
    .setCustomId(reasonModalId(runId))
    .setTitle("What went wrong?")
    .addLabelComponents(
      new LabelBuilder()
        .setLabel("Tell us why (optional)")
        .setTextInputComponent(
          new TextInputBuilder()
            .setCustomId(REASON_INPUT)
            .setStyle(TextInputStyle.Paragraph)
            .setRequired(false)
            .setMaxLength(MAX_REASON_CHARS),
        ),
    );
}
