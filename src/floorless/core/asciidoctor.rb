# frozen_string_literal: true

# The AsciiDoc worker of floorless (see asciidoctor.py): loads Asciidoctor once, then converts
# the documents it is sent on standard input, one at a time, answering each on standard output.
#
# A request is a 4-byte big-endian length and that many bytes of UTF-8 AsciiDoc. An answer is
# one status byte ("o" converted, "e" not) and a 4-byte length, then that many bytes: the HTML,
# or why not. Once loaded, the worker answers "r" with Asciidoctor's version, before reading.
#
# Arguments: the largest answer in bytes, and the address space the process may take (a
# document that asks for more, such as a table of 100 million columns, ends the process: the
# server starts another for the next document).
#
# Nothing here may reach past the document: the safe mode is SECURE (no include of any file or
# URL, no docinfo, no reading of the environment), the attributes below are set from here and
# locked (a document cannot set them again), and no extension but linkgit: is registered.

require 'asciidoctor'

MAX_ANSWER = Integer(ARGV.fetch(0))
Process.setrlimit(:AS, Integer(ARGV.fetch(1))) if ARGV[1] && Integer(ARGV[1]).positive?

ATTRIBUTES = {
  'showtitle' => '',            # the document's title is its first heading, as on GitHub
  'idprefix' => '',             # ids as GitHub's (and the Markdown side's): "usage", not "_usage"
  'idseparator' => '-',
  'outfilesuffix' => '.adoc',   # xref:other.adoc[] names the other document's page, not a .html
  'env' => 'floorless',
  'env-floorless' => '',
  'source-highlighter' => 'html-pipeline', # <pre lang="python"><code>: floorless highlights it
  'allow-uri-read' => nil,      # no URL is ever fetched,
  'data-uri' => nil,            # no image read to embed it,
  'max-include-depth' => 0,     # and no include, were SECURE ever to allow one
  'icons' => nil,               # admonitions and callouts as text, not fonts or image files
  'nofootnotes' => '',          # footnotes are written below, with the ids the allow-list keeps
  'docinfo' => nil
}.freeze

# Asciidoctor's HTML with what floorless's allow-list keeps and the page's style expects:
# admonitions as a titled box (not a layout table), callouts in code as plain text (the code is
# highlighted afterwards), footnotes and their references with Markdown's ids, anchors by name.
class FloorlessHtml < (Asciidoctor::Converter.for 'html5')
  register_for 'html5'

  def convert_admonition(node)
    kind = node.attr 'name'
    label = node.title? ? node.title : (node.attr 'textlabel')
    content = node.blocks? ? node.content : %(<p>#{node.content}</p>)
    %(<div class="admonition #{kind}"><p><strong>#{label}</strong></p>\n#{content}\n</div>)
  end

  def convert_inline_callout(node)
    %((#{node.text}))
  end

  def convert_inline_footnote(node)
    if (index = node.attr 'index')
      # a footnote named again (footnote:name[]) links to it; the id is its first reference's
      id = node.type == :xref ? '' : %( id="fnref-#{index}")
      %(<sup class="footnote-ref"><a href="#fn-#{index}"#{id}>#{index}</a></sup>)
    else
      %(<sup class="footnote-ref">[#{node.text}]</sup>)
    end
  end

  def convert_inline_anchor(node)
    return %(<a name="#{node.id}"></a>) if node.type == :ref

    super
  end

  def convert_embedded(node)
    html = super
    return html unless node.footnotes?

    notes = node.footnotes.map do |note|
      %(<li id="fn-#{note.index}"><p>#{note.text} ) +
        %(<a href="#fnref-#{note.index}" class="footnote-backref">↩</a></p></li>)
    end
    %(#{html}\n<section class="footnotes"><ol>\n#{notes.join("\n")}\n</ol></section>)
  end
end

# git's documentation links its pages as linkgit:git-add[1]: the page beside this one.
LINKGIT = Asciidoctor::Extensions.create do
  inline_macro do
    named :linkgit
    process do |parent, target, attrs|
      section = attrs[1] || attrs['1']
      text = section ? %(#{target}(#{section})) : target
      create_anchor parent, text, type: :link, target: %(#{target}.adoc)
    end
  end
end

Asciidoctor::LoggerManager.logger = Asciidoctor::NullLogger.new

def answer(status, body)
  body = body.b
  $stdout.write(status, [body.bytesize].pack('N'), body)
  $stdout.flush
end

def convert(text)
  Asciidoctor.convert(
    text, safe: :secure, standalone: false, attributes: ATTRIBUTES, extension_registry: LINKGIT
  )
end

convert("= Ready\n\nA first document loads what converting needs.\n")
$stdin.binmode
$stdout.binmode
answer('r', Asciidoctor::VERSION)
while (head = $stdin.read(4)) && head.bytesize == 4
  size = head.unpack1('N')
  text = $stdin.read(size)
  break if text.nil? || text.bytesize != size

  begin
    html = convert(text.force_encoding(Encoding::UTF_8).scrub)
    if html.bytesize > MAX_ANSWER
      answer('e', "larger than #{MAX_ANSWER} bytes")
    else
      answer('o', html)
    end
  rescue StandardError, SystemStackError => e
    answer('e', e.class.name)
  rescue NoMemoryError => e # what it holds may not all be freed: a new worker takes over
    answer('e', e.class.name)
    exit 1
  end
end
