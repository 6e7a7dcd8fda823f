# pcc_embed_text(INPUT OUTPUT): writes OUTPUT, a C++ raw string literal of
# INPUT's text (through Embed.inc.in), for the compiler to carry a file it
# writes next to the code it generates (the kernel headers, the runtime's
# ABI header, the machine descriptions). CMake re-configures when INPUT
# changes.
function(pcc_embed_text input output)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${input})
  file(READ ${input} PCC_EMBED_TEXT)
  set(PCC_EMBED_TEXT "R\"pcc_embed(${PCC_EMBED_TEXT})pcc_embed\"")
  configure_file(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/Embed.inc.in ${output}
    @ONLY)
endfunction()
